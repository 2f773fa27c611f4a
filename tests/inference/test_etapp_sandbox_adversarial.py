"""ETAPP sandbox on adversarial calls: bad argument types, padded and unpadded strings, trailing
text after a date, missing and extra arguments, names that collide with the executor's own
parameters, repeated calls in one per-tool state and over-long messages. Each expected string is
what upstream's own tool code answers to the same call on this data (its executor, its app classes,
its clock), written out literally. Model-free; the shared data is read once per module."""

from __future__ import annotations

from typing import Any

import pytest

from inference.benchmarks.etapp.sandbox import Sandbox, SandboxData
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.shared_data

ETAPP = SHARED_DATA / "etapp"
SARAH, NOW = "Sarah_Johnson", "2024-09-06 07:15:00"
MULTIPLE = "ToolManager.api_call() got multiple values for argument "
LIGHT = {"action": "on", "location": "kitchen"}
MAIL = {"receiver": "a@b.co", "subject": "Hi", "content": "x"}
WEATHER = {"location": "Boston", "start_time": "2024-09-08", "end_time": "2024-09-08"}


@pytest.fixture(scope="module")
def data() -> SandboxData:
    if not (ETAPP / "SOURCE.md").is_file():
        pytest.skip(f"ETAPP data absent: {ETAPP} not found (it lives in ../shared/data)")
    return SandboxData.load(ETAPP, SHARED_DATA / "travelplanner")


def answer(data: SandboxData, name: str, arguments: Any, *, user: str = SARAH, now: str = NOW,
           e_react: bool = False) -> str:
    return Sandbox(data, user, now).call(name, arguments, e_react=e_react).text


CALLS = [
    # The executor binds the arguments before any tool runs: its own parameter names collide.
    ("executor-tool-name", "get_user_recent_workout_records", {"time": "2024-09-01 00:00:00", "tool_name": "x"},
     MULTIPLE + "'tool_name'"),
    ("executor-self", "find_accommodations", {"city": "Boston", "self": 1}, MULTIPLE + "'self'"),
    ("executor-no-argument-tool", "view_today_alarms", {"tool_name": "a"}, MULTIPLE + "'tool_name'"),
    ("executor-first-collision-wins", "add_alarm", {"self": 2, "tool_name": 1}, MULTIPLE + "'self'"),
    ("executor-before-tool-lookup", "nope", {"tool_name": 1, "self": 2}, MULTIPLE + "'tool_name'"),
    ("executor-non-string-key", "add_alarm", {"alarm_time": "x", "message": "m", 1: 2}, "keywords must be strings"),
    ("executor-list-arguments", "add_alarm", [1],
     "PLA.toolkit.tool_manager.ToolManager.api_call() argument after ** must be a mapping, not list"),
    ("unknown-padded-name", " send_email", {}, "invalid tool name  send_email."),
    ("missing-two", "find_flight", {"origin_city": "A"},
     "Navigation_And_Map.find_flight() missing 2 required positional arguments: 'destination_city' and "
     "'departure_date'"),
    ("missing-one", "add_alarm", {"alarm_time": 5}, "Calendar.add_alarm() missing 1 required positional argument: "
                                                    "'message'"),
    # Curtains: capitalised first (any non-string fails there), then the raw value is checked.
    ("curtains-int", "control_curtains_in_home", {"open": 0}, "'int' object has no attribute 'capitalize'"),
    ("curtains-null", "control_curtains_in_home", {"open": None}, "'NoneType' object has no attribute 'capitalize'"),
    ("curtains-list", "control_curtains_in_home", {"open": []}, "'list' object has no attribute 'capitalize'"),
    ("curtains-false", "control_curtains_in_home", {"open": False}, "'bool' object has no attribute 'capitalize'"),
    ("curtains-lowercase", "control_curtains_in_home", {"open": "true"}, "The open must be 'True' or 'False'."),
    ("curtains-padded", "control_curtains_in_home", {"open": " True"}, "The open must be 'True' or 'False'."),
    # Bathtub: fill is normalised and checked before keep_temperature is touched.
    ("bathtub-bad-fill-bad-keep-type", "control_bathtub_in_home",
     {"fill": " True", "keep_temperature": 5, "temperature": "hot", "water_level": 30},
     "The fill must be 'True' or 'False'."),
    ("bathtub-bad-fill-null-keep", "control_bathtub_in_home", {"fill": "maybe", "keep_temperature": None},
     "The fill must be 'True' or 'False'."),
    ("bathtub-null-fill", "control_bathtub_in_home", {"fill": None, "keep_temperature": []},
     "'NoneType' object has no attribute 'capitalize'"),
    ("bathtub-upper-fill-bad-keep", "control_bathtub_in_home", {"fill": "TRUE", "keep_temperature": "maybe"},
     "The keep_temperature must be 'True' or 'False'."),
    ("kettle-string-temperature", "boil_water_in_home", {"temperature": "90"},
     "'>' not supported between instances of 'str' and 'int'"),
    ("kettle-hot-before-keep", "boil_water_in_home", {"temperature": 101, "keep_temperature": None},
     '{"status": "failure", "message": "Error: Temperature exceeds boiling point of water."}'),
    ("kettle-upper-false", "boil_water_in_home", {"temperature": 100.0, "keep_temperature": "FALSE"},
     '{"status": "success", "message": "Water has boiled at 100.0°C."}'),
    # Mail: the subject is stripped before the content, so its type error comes first.
    ("mail-int-subject-null-content", "send_email", {"receiver": "", "subject": 5, "content": None},
     "'int' object has no attribute 'strip'"),
    ("mail-null-subject-list-content", "send_email", {"receiver": "a@b.co", "subject": None, "content": []},
     "'NoneType' object has no attribute 'strip'"),
    ("mail-empty-subject-int-content", "send_email", {"receiver": " bob@example.org ", "subject": "", "content": 7},
     "'int' object has no attribute 'strip'"),
    ("mail-blank-subject", "send_email", dict(MAIL, subject="  "),
     '{"status": "failure", "message": "Subject cannot be empty."}'),
    ("mail-padded-list", "send_email", {"receiver": [" a@b.co", "c@d.org\n"], "subject": " Hi ", "content": " x "},
     '{"status": "success", "message": "The mail to [\'a@b.co\', \'c@d.org\'] is send"}'),
    ("mail-null-in-list", "send_email", dict(MAIL, receiver=["a@b.co", None]),
     "'NoneType' object has no attribute 'strip'"),
    ("mail-null-receiver", "send_email", dict(MAIL, receiver=None),
     '{"status": "failure", "message": "Email receiver should be a string or a list of strings."}'),
    ("sender-null", "search_email_by_sender_and_receiver", {"address": None},
     "'NoneType' object has no attribute 'strip'"),
    ("content-int", "search_email_by_content", {"query": 5}, "'int' object has no attribute 'split'"),
    # Tool docs: the request is iterated, so a scalar fails as "not iterable".
    ("doc-int", "get_tool_doc", {"tools_name": 5}, "'int' object is not iterable"),
    ("doc-bool", "get_tool_doc", {"tools_name": True}, "'bool' object is not iterable"),
    ("doc-null", "get_tool_doc", {"tools_name": None}, "'NoneType' object is not iterable"),
    ("doc-float", "get_tool_doc", {"tools_name": 2.5}, "'float' object is not iterable"),
    ("doc-padded", "get_tool_doc", {"tools_name": " send_email"}, '{"status": "success", "data": {}}'),
    ("doc-dict", "get_tool_doc", {"tools_name": {"a": 1}}, '{"status": "success", "data": {}}'),
    ("search-tools-null", "search_tools", {"keywords": None},
     '{"status": "failure", "input": {"keywords": null}, "output": null, '
     '"exception": "\'NoneType\' object is not iterable"}'),
    # Music and shopping fail on the argument's type before they reach a catalogue.
    ("music-null", "play_music", {"music_name": None, "volume_level": 30}, "'NoneType' object has no attribute 'lower'"),
    ("music-list", "play_music", {"music_name": [], "volume_level": 30}, "'list' object has no attribute 'lower'"),
    ("music-int", "play_music", {"music_name": 5, "volume_level": 30}, "'int' object has no attribute 'lower'"),
    ("products-empty-list", "search_products_in_shopping_manager", {"query": []},
     '{"status": "No products found for \'[]\'", "products": []}'),
    ("products-dict", "search_products_in_shopping_manager", {"query": {"laptop": 1}},
     "'dict' object has no attribute 'split'"),
    ("products-int-item", "search_products_in_shopping_manager", {"query": [5]}, "'int' object has no attribute 'split'"),
    # Weather: the start date is looked up as written; the end date is read after it.
    ("future-unpadded-start", "get_future_weather", dict(WEATHER, start_time="2024-09-8", end_time="2024-09-10"),
     '{"status": "error", "message": "start_Time not found for the given location"}'),
    ("future-unpadded-start-bad-end", "get_future_weather", dict(WEATHER, start_time="2024-9-8", end_time="junk"),
     '{"status": "error", "message": "start_Time not found for the given location"}'),
    ("future-trailing-end", "get_future_weather", dict(WEATHER, end_time="2024-9-9 extra"),
     "unconverted data remains:  extra"),
    ("future-padded-city", "get_future_weather", dict(WEATHER, location=" Boston"),
     '{"status": "error", "message": "Location not found"}'),
    ("today-list-city", "get_today_weather", {"location": ["Boston"]}, "unhashable type: 'list'"),
    # Dates and times: strptime takes unpadded fields, not trailing text.
    ("workouts-trailing", "get_user_recent_workout_records", {"time": "2024-09-08 10:00:00 extra"},
     "unconverted data remains:  extra"),
    ("range-trailing", "view_events_in_calendar_by_providing_time_range",
     {"start_time": "2024-09-06 extra", "end_time": "2024-09-07"}, "unconverted data remains:  extra"),
    ("event-unpadded-start-before-end", "add_event_in_calendar",
     {"title": "t", "description": "d", "start_time": "2024-9-20 9:0:0", "end_time": "2024-09-20 08:00:00"},
     "End time must be after start time."),
    ("event-empty-reminder", "add_event_in_calendar",
     {"title": "t", "description": "d", "start_time": "2024-9-20 9:0:0", "end_time": "2024-09-20 10:00:00",
      "reminder": ""}, "time data '' does not match format '%Y-%m-%d %H:%M:%S'"),
    ("delete-empty-list", "delete_event_in_calendar", {"event_id": []}, "('Lengths must match to compare', (18,), (0,))"),
    ("delete-bool", "delete_event_in_calendar", {"event_id": True},
     '{"status": "failure", "message": "Event id True is not found"}'),
    ("light-title-case-room", "control_light_in_home",
     {"action": "on", "location": "Living Room", "brightness": 3, "color": "white-yellow"},
     '{"status": "success", "message": "Light in living room is now ON with brightness 3 and color white-yellow."}'),
    ("light-upper-action", "control_light_in_home", dict(LIGHT, action="ON"), "The action must be 'on' or 'off'."),
    ("light-padded-room", "control_light_in_home", dict(LIGHT, location=" kitchen"),
     "Invalid location. Supported locations are: residence, kitchen, dining room, living room, bedroom, bathroom."),
    ("light-float-brightness", "control_light_in_home", dict(LIGHT, brightness=2.0, color="yellow"),
     '{"status": "success", "message": "Light in kitchen is now ON with brightness 2.0 and color yellow."}'),
    ("thermostat-humidity-only", "set_temperature_and_humidity_in_home", {"humidity": 40},
     '{"status": "success", "message": "Current temperature set to None°C and current humidity set to 40%."}'),
    ("thermostat-false", "set_temperature_and_humidity_in_home", {"temperature": False},
     '{"status": "success", "message": "Current temperature set to False°C."}'),
    ("news-null", "search_news_by_category", {"category": None},
     '{"status": "error", "message": "The query None is not in defined category"}'),
]


@pytest.mark.parametrize("name,arguments,expected", [pytest.param(*row[1:], id=row[0]) for row in CALLS])
def test_an_adversarial_call_answers_as_upstream(data, name, arguments, expected):
    assert answer(data, name, arguments) == expected


HOME = "get_home_temperature_and_humidity"


@pytest.mark.parametrize("at_time,expected", [
    ("2024-9-8 10:00:00", "'2024-9-8'"),
    ("2024-09-08 00:00:00", "'NoneType' object is not subscriptable"),
    ("2024-09-08  10:00:00", '{"status": "success", "message": "Current Temperature: 16.1°C, Current Humidity: 56%."}'),
    ("2024-09-08 10:00",
     '{"status": "success", "message": "Current Temperature: {\'status\': \'error\', \'message\': \\"the at_time '
     'format not right: time data \'2024-09-08 10:00\' does not match format \'%Y-%m-%d %H:%M:%S\'\\"}°C, Current '
     'Humidity: {\'status\': \'error\', \'message\': \\"the at_time format not right: time data \'2024-09-08 10:00\' '
     'does not match format \'%Y-%m-%d %H:%M:%S\'\\"}%."}'),
    (None,
     '{"status": "success", "message": "Current Temperature: {\'status\': \'error\', \'message\': \'the at_time '
     'format not right: strptime() argument 1 must be str, not None\'}°C, Current Humidity: {\'status\': \'error\', '
     '\'message\': \'the at_time format not right: strptime() argument 1 must be str, not None\'}%."}'),
], ids=["unpadded-date-key", "midnight-nothing-before", "double-space", "no-seconds", "null"])
def test_thermostat_bad_times_answer_as_upstream(data, at_time, expected):
    assert answer(data, HOME, {"at_time": at_time}, user="John_Doe", now="2024-09-08 17:45:00") == expected


def test_exception_messages_are_not_cut_results_are(data):
    """Only a serialised result is cut (E-ReAct's 1..8191 too); an exception's message is whole."""
    long = "x" * 9000
    time_error = f"time data '{long}' does not match format '%Y-%m-%d %H:%M:%S'"
    for e_react in (False, True):
        assert answer(data, "get_user_recent_workout_records", {"time": long}, e_react=e_react) == time_error
        assert answer(data, "nope" + long, {}, e_react=e_react) == f"invalid tool name nope{long}."
    returned = answer(data, "send_email", dict(MAIL, receiver=long))
    assert returned == ('{"status": "failure", "message": "Invalid email address: ' + long)[:8192]


def _event(title: str, start: str, end: str) -> dict[str, str]:
    return {"title": title, "description": "d", "start_time": start, "end_time": end}


STEPS = [
    ("2024-09-06 07:15:00", "add_event_in_calendar",
     _event("A", "2024-09-20 10:00:00", "2024-09-20 11:00:00"),
     '{"status": "success", "message": "Event added successfully."}'),
    ("2024-09-06 07:15:00", "add_event_in_calendar",
     _event("B", "2024-9-20 10:30:00", "2024-09-20 11:30:00"),
     '{"status": "failure", "error message": "The new event is conflicting with other events in Calendar."}'),
    ("2024-09-06 07:15:00", "view_events_in_calendar_by_providing_time_range",
     {"start_time": "2024-09-20", "end_time": "2024-09-20"}, '{"status": "success", "data": []}'),
    ("2024-09-06 07:15:00", "delete_event_in_calendar", {"event_id": 2024090616789},
     '{"status": "success", "message": "Event deleted successfully."}'),
    ("2024-09-07 09:00:00", "delete_event_in_calendar", {"event_id": 2024090616789},
     '{"status": "failure", "message": "Event id 2024090616789 is not found"}'),
    ("2024-09-07 09:00:00", "add_event_in_calendar",
     _event("C", "2024-09-20 10:59:00", "2024-09-20 12:00:00"),
     '{"status": "failure", "error message": "The new event is conflicting with other events in Calendar."}'),
    ("2024-09-07 09:00:00", "add_event_in_calendar",
     _event("D", "2024-09-20 11:00:00", "2024-09-20 12:00:00"),
     '{"status": "success", "message": "Event added successfully."}'),
    ("2024-09-07 09:00:00", "control_curtains_in_home", {"open": 1}, "'int' object has no attribute 'capitalize'"),
    ("2024-09-07 09:00:00", "control_curtains_in_home", {"open": "False"},
     '{"status": "success", "message": "Curtains closed."}'),
]


def test_repeated_calls_in_one_per_tool_state_answer_as_upstream(data):
    """One user's calls in order, the clock moving between cases: each tool sees only its own
    earlier changes (the view does not see the added event, the second delete finds nothing)."""
    box = Sandbox(data, "Alex_Thompson", STEPS[0][0], state="tool")
    answers = []
    for now, name, arguments, _ in STEPS:
        box.advance(now)
        answers.append(box.call(name, arguments).text)
    assert answers == [expected for *_, expected in STEPS]
