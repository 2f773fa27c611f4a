"""ETAPP sandbox golden tests: every one of the 35 tools called on the real user data, the
observation compared character for character with a value worked out from the tables (the CSV rows
read with the csv module, the JSON files, or written out by hand), plus the spec's quirks, state
modes, error wording and data validation. Model-free; the shared data is read once per module."""

from __future__ import annotations

import csv
import json
import math
import shutil
from datetime import datetime, timedelta
from typing import Any

import pytest

from inference.benchmarks.etapp.apps import APPS, SUBSTITUTED_TOOLS
from inference.benchmarks.etapp.sandbox import (OBSERVATION_CAP, SUBSTITUTE_VERSIONS, TOOL_NAMES, Observation,
                                                Sandbox, SandboxData)
from inference.benchmarks.etapp.sandbox.bm25 import BM25Okapi, top_indices
from inference.benchmarks.etapp.sandbox.catalogues import PRODUCTS_FILE
from inference.benchmarks.etapp.sandbox.flights import CITIES, COLUMNS, generate_flights, great_circle_miles
from inference.benchmarks.etapp.sandbox.sandbox import TOOL_CLASSES
from inference.benchmarks.etapp.sandbox.searcher_app import tool_corpus
from inference.errors import ConfigError, DatasetError
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.shared_data

ETAPP = SHARED_DATA / "etapp"
TRAVELPLANNER = SHARED_DATA / "travelplanner"
NAN = math.nan
JAMES, ALEXANDER = "James_Harrington", "Alexander_James_Carter"


@pytest.fixture(scope="module")
def data() -> SandboxData:
    if not (ETAPP / "SOURCE.md").is_file():
        pytest.skip(f"ETAPP data absent: {ETAPP} not found (it lives in ../shared/data)")
    return SandboxData.load(ETAPP, TRAVELPLANNER)




def run(data: SandboxData, user: str, now: str, name: str, arguments: Any = None, **options: Any) -> Observation:
    """One call on a fresh sandbox (upstream's per-case reset)."""
    e_react = options.pop("e_react", False)
    return Sandbox(data, user, now, **options).call(name, {} if arguments is None else arguments, e_react=e_react)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def success(payload: Any, key: str = "data") -> str:
    return dumps({"status": "success", key: payload})


def csv_rows(relative: str, ints: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A CSV as pandas types it for these tables: the named int columns, blanks and the text "None"
    as NaN, everything else text (checked against the observed dtypes by hand)."""
    with (ETAPP / relative).open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [{k: int(v) if k in ints else (NAN if v in ("", "None") else v) for k, v in row.items()} for row in rows]


def by_id(rows: list[dict[str, Any]], ids: list[int]) -> list[dict[str, Any]]:
    index = {row["id"]: row for row in rows}
    return [index[i] for i in ids]


def ids_of(observation: Observation) -> list[Any]:
    return [record["id"] for record in json.loads(observation.text)["data"]]


# --- the tool list -------------------------------------------------------------------------------

def test_tool_names_are_the_35_config_entries_in_sorted_app_order(etapp_data):
    names = [entry["function"]["name"] for app in APPS
             for entry in json.loads((ETAPP / "toolkit" / app.folder / "config.json").read_text())]
    assert list(TOOL_NAMES) == names and len(names) == 35
    assert list(TOOL_CLASSES) == names, "every tool has exactly one implementing class"
    assert TOOL_CLASSES["control_light_in_home"].__name__ == "Light"
    assert set(SUBSTITUTED_TOOLS) <= set(SUBSTITUTE_VERSIONS) <= set(TOOL_NAMES)


# --- calendar ------------------------------------------------------------------------------------

ADDED = '{"status": "success", "message": "Event added successfully."}'
CANOEING = ('{"id": 2024090616789, "title": "Canoeing", "description": "Canoeing in the nearby Charles River for '
            'exercise and reflection.", "start_time": "2024-09-06 06:30:00", "end_time": "2024-09-06 07:30:00", '
            '"reminder": "2024-09-06 06:00:00"}')
STRETCH = ('{"id": 2024090712345, "title": "Morning Stretch Routine", "description": "Start the day with a quick '
           'stretch routine in the living room to loosen up and energize.", "start_time": "2024-09-07 05:30:00", '
           '"end_time": "2024-09-07 06:00:00", "reminder": NaN}')


def day(events: list[str]) -> str:
    return '{"status": "success", "data": [' + ", ".join(events) + "]}"


def test_view_today_alarms_spec_example(data):
    observation = run(data, JAMES, "2024-09-06 07:15:00", "view_today_alarms")
    assert observation == Observation('{"status": "success", "data": [{"id": 2024090612399, "alarm_time": '
                                      '"2024-09-06 06:30:00", "message": "Wake up and prepare for the day."}]}', False)


def test_an_unpadded_hour_in_now_is_accepted(data):
    """Instruction 9's timestamp "2024-09-08 7:45:00"."""
    observation = run(data, JAMES, "2024-09-08 7:45:00", "view_today_alarms")
    assert observation.text == ('{"status": "success", "data": [{"id": 2024090812360, "alarm_time": "2024-09-08 '
                                '06:00:00", "message": "Wake up and start the day with mindfulness meditation."}]}')


def test_view_today_events_shows_the_reminder_text_or_nan(data):
    assert run(data, ALEXANDER, "2024-09-06 07:15:00", "view_today_events_in_calendar").text == \
        '{"status": "success", "data": [' + CANOEING + ']}'
    assert run(data, ALEXANDER, "2024-09-07 07:15:00", "view_today_events_in_calendar").text == \
        '{"status": "success", "data": [' + STRETCH + ']}'


@pytest.mark.parametrize("start,end,expected", [
    ("2024-09-06", "2024-09-07", [CANOEING]),  # end bound is 09-07 00:00: the 05:30 stretch is missed
    ("2024-09-07", "2024-09-07", [STRETCH]),  # one day: the whole day
    ("2024-09-06", "2024-09-08", [CANOEING, STRETCH]),
    ("2024-09-08", "2024-09-06", []),  # reversed range: nothing, no error
], ids=["end-date-excluded", "single-day", "two-days", "reversed"])
def test_time_range_end_date_is_cut_at_midnight(data, start, end, expected):
    observation = run(data, ALEXANDER, "2024-09-06 07:15:00", "view_events_in_calendar_by_providing_time_range",
                      {"start_time": start, "end_time": end})
    assert observation.text == '{"status": "success", "data": [' + ", ".join(expected) + ']}'


def test_time_range_keeps_file_order_and_ignores_now(data):
    observation = run(data, ALEXANDER, "2024-09-01 07:15:00", "view_events_in_calendar_by_providing_time_range",
                      {"start_time": "2024-09-05", "end_time": "2024-09-10"})
    # the 09-09 row sits before the 09-06 one in the file
    assert ids_of(observation) == [2024090512348, 2024090912348, 2024090616789, 2024090712345]


def test_add_event_success_conflict_and_validation(data):
    box = Sandbox(data, ALEXANDER, "2024-09-06 07:15:00")
    event = {"title": "Call", "description": "d", "start_time": "2024-09-06 09:00:00",
             "end_time": "2024-09-06 10:00:00"}
    assert box.call("add_event_in_calendar", event).text == ADDED
    conflict = '{"status": "failure", "error message": "The new event is conflicting with other events in Calendar."}'
    assert box.call("add_event_in_calendar", event) == Observation(conflict, True)  # the tool sees its own addition
    overlap = dict(event, start_time="2024-09-06 07:00:00", end_time="2024-09-06 08:00:00")  # Canoeing 06:30-07:30
    assert box.call("add_event_in_calendar", overlap).text == conflict
    touching = dict(event, start_time="2024-09-06 07:30:00", end_time="2024-09-06 08:00:00")  # strict overlap only
    assert box.call("add_event_in_calendar", touching).error is False
    backwards = dict(event, start_time="2024-09-06 12:00:00", end_time="2024-09-06 11:00:00")
    assert box.call("add_event_in_calendar", backwards) == Observation("End time must be after start time.", True)
    assert box.call("add_event_in_calendar", dict(event, reminder="tomorrow")).text == \
        "time data 'tomorrow' does not match format '%Y-%m-%d %H:%M:%S'"


def test_per_tool_state_an_addition_or_deletion_is_invisible_to_the_views(data):
    box = Sandbox(data, ALEXANDER, "2024-09-06 07:15:00")
    before = box.call("view_today_events_in_calendar", {}).text
    box.call("add_event_in_calendar", {"title": "Call", "description": "d", "start_time": "2024-09-06 09:00:00",
                                       "end_time": "2024-09-06 10:00:00", "reminder": "2024-09-06 08:30:00"})
    assert box.call("delete_event_in_calendar", {"event_id": 2024090616789}).text == \
        '{"status": "success", "message": "Event deleted successfully."}'
    assert box.call("view_today_events_in_calendar", {}).text == before == day([CANOEING])
    assert box.call("delete_event_in_calendar", {"event_id": 2024090616789}) == \
        Observation('{"status": "failure", "message": "Event id 2024090616789 is not found"}', True)
    box.call("add_alarm", {"alarm_time": 5, "message": "bad"})  # a malformed alarm stays in add_alarm's table
    assert box.call("view_today_alarms", {}).error is False


def test_delete_matches_int_ids_only(data):
    observation = run(data, ALEXANDER, "2024-09-06 07:15:00", "delete_event_in_calendar", {"event_id": "2024090616789"})
    assert observation == Observation('{"status": "failure", "message": "Event id 2024090616789 is not found"}', True)


def test_app_state_views_see_additions_deletions_and_upstream_quirks(data):
    box = Sandbox(data, ALEXANDER, "2024-09-06 07:15:00", state="app")
    box.call("add_event_in_calendar", {"title": "Call", "description": "d", "start_time": "2024-09-06 09:00:00",
                                       "end_time": "2024-09-06 10:00:00"})
    added = ('{"id": "2024-09-0610000", "title": "Call", "description": "d", "start_time": "2024-09-06 09:00:00", '
             '"end_time": "2024-09-06 10:00:00", "reminder": null}')
    assert box.call("view_today_events_in_calendar", {}).text == day([CANOEING, added])
    box.call("delete_event_in_calendar", {"event_id": 2024090616789})
    assert box.call("view_today_events_in_calendar", {}).text == day([added])
    box.call("add_event_in_calendar", {"title": "R", "description": "d", "start_time": "2024-09-06 11:00:00",
                                       "end_time": "2024-09-06 12:00:00", "reminder": "2024-09-06 10:30:00"})
    # upstream stores the reminder as a Timestamp: any view that includes the event fails
    assert box.call("view_today_events_in_calendar", {}) == \
        Observation("Object of type Timestamp is not JSON serializable", True)
    assert box.call("add_alarm", {"alarm_time": "2024-09-06 20:00:00", "message": "m"}).text == \
        '{"status": "success", "message": "Alarm added successfully"}'
    assert ids_of(box.call("view_today_alarms", {})) == [2024090611111, 2024090633333, "2024-09-0610002"]
    box.call("add_alarm", {"alarm_time": 5, "message": "bad"})
    assert box.call("view_today_alarms", {}) == \
        Observation("Cannot mask with non-boolean array containing NA / NaN values", True)


def test_advance_keeps_the_per_tool_tables_and_moves_the_clock(data):
    box = Sandbox(data, ALEXANDER, "2024-09-06 07:15:00")
    event = {"title": "Call", "description": "d", "start_time": "2024-09-08 09:00:00",
             "end_time": "2024-09-08 10:00:00"}
    assert box.call("add_event_in_calendar", event).error is False
    box.advance("2024-09-08 7:45:00")
    assert box.now == "2024-09-08 7:45:00"
    assert box.call("add_event_in_calendar", event).error is True  # the earlier case's addition is still there
    assert ids_of(box.call("view_today_alarms", {})) == [2024090812399]
    fresh = Sandbox(data, ALEXANDER, "2024-09-08 07:45:00")
    assert fresh.call("add_event_in_calendar", event).error is False


# --- email ---------------------------------------------------------------------------------------

JAMES_MAIL = "database/Email/emails_James_Harrington.csv"


def james_mail(ids: list[int]) -> str:
    return success(by_id(csv_rows(JAMES_MAIL, ints=("id",)), ids))


@pytest.mark.parametrize("arguments,expected", [
    ({"receiver": "Alice@email.com", "subject": "Dinner", "content": "Tonight at 7?"},
     '{"status": "success", "message": "The mail to [\'Alice@email.com\'] is send"}'),
    ({"receiver": ["a@b.com", "c.d@e.org"], "subject": "s", "content": "c", "attachments": None},
     '{"status": "success", "message": "The mail to [\'a@b.com\', \'c.d@e.org\'] is send"}'),
    ({"receiver": "a@b.com", "subject": "  ", "content": "c"},
     '{"status": "failure", "message": "Subject cannot be empty."}'),
    ({"receiver": "a@b.com", "subject": "s", "content": ""},
     '{"status": "failure", "message": "Content cannot be empty."}'),
    ({"receiver": "a@b.com, c@d.com", "subject": "s", "content": "c"},
     '{"status": "failure", "message": "Invalid email address: a@b.com, c@d.com"}'),
    ({"receiver": 7, "subject": "s", "content": "c"},
     '{"status": "failure", "message": "Email receiver should be a string or a list of strings."}'),
], ids=["string", "list", "blank-subject", "empty-content", "comma-separated", "not-a-string"])
def test_send_email(data, arguments, expected):
    observation = run(data, JAMES, "2024-09-06 16:30:00", "send_email", arguments)
    assert observation == Observation(expected, '"failure"' in expected)


def test_today_emails_until_now_spec_case(data):
    """Instruction 7 for James: ten mails of 09-06 before 18:45 (the 19:45 one is not yet sent)."""
    observation = run(data, JAMES, "2024-09-06 18:45:00", "get_today_emails_until_now")
    assert observation.text == james_mail([2024090600123, *range(2024090612345, 2024090612354)])
    assert len(observation.text) == 4445


def test_search_by_address_is_case_insensitive_and_before_now(data):
    query = {"address": " CHEF@TheProgress.com "}
    assert run(data, JAMES, "2024-09-06 18:45:00", "search_email_by_sender_and_receiver", query).text == \
        james_mail([2024090612351])
    assert run(data, JAMES, "2024-09-06 12:00:00", "search_email_by_sender_and_receiver", query).text == \
        '{"status": "success", "data": []}'


@pytest.mark.parametrize("query,expected", [
    # no token matches: the first five past mails in file order, then newest first
    ("zzzz", [2024090106789, 2024090103456, 2024090105678, 2024090102345, 2024090101234]),
    # "thoroughly" is in one mail only (09-06 15:00); four zero-score mails fill the top five
    ("thoroughly", [2024090612351, 2024090106789, 2024090105678, 2024090102345, 2024090101234]),
    # 612347 (a short mail to Carlos) outscores 600123 (the picnic invitation); both are dated
    # 09-06 10:00, and the stable re-sort keeps that score order against file order (correction 4)
    ("Carlos, picnic", [2024090612347, 2024090600123, 2024090416789, 2024090305678, 2024090212347]),
], ids=["no-match", "one-match", "equal-timestamps"])
def test_search_email_by_content(data, query, expected):
    observation = run(data, JAMES, "2024-09-06 18:45:00", "search_email_by_content", {"query": query})
    assert observation.text == james_mail(expected)


def test_search_email_by_content_leaves_out_mails_from_now_on(data):
    observation = run(data, JAMES, "2024-09-06 12:00:00", "search_email_by_content", {"query": "thoroughly"})
    assert 2024090612351 not in ids_of(observation)


# --- health --------------------------------------------------------------------------------------

def test_current_health_is_the_last_reading_before_now(data):
    assert run(data, JAMES, "2024-09-06 08:30:00", "get_current_health_and_mood_status").text == (
        '{"status": "success", "data": [{"timestamp": "2024-09-06 08:00:00", "steps": 5000, "distance_travelled": 3.5, '
        '"calories_burned": 300.0, "sleep_status": "awake", "sleep_hours": 7.0, "body_temperature": 36.7, '
        '"blood_pressure": "122/80", "heart_rate": 75, "blood_oxygen_saturation": 98, "mood": "happy", '
        '"stress_level": 2}]}')


WORKOUTS_0905 = (
    '{"status": "success", "data": [{"Activity Type": "Running", "Start Time": "2024-09-05 06:30:00", "End Time": '
    '"2024-09-05 07:15:00", "Duration": 45, "Average Heart Rate": 140, "Maximum Heart Rate": 165, "Calories Burned": '
    '400, "Exercise Effect Analysis": "Aerobic endurance improved", "System Suggestion": "Increase interval training '
    'to boost speed", "Average Pace": "6:45", "Cadence": 158.0, "Route": "GPS Track Golden Gate Park", "Speed Curve": '
    '"Speed Curve 1", "Heart Rate Curve": "Heart Rate Curve 1", "Breathing Rate": NaN, "Relaxation State": NaN, '
    '"Pose Count": NaN, "Focus Area": NaN, "Distance": NaN, "Average Speed": NaN, "Elevation Gain": NaN}, '
    '{"Activity Type": "Yoga", "Start Time": "2024-09-05 09:00:00", "End Time": "2024-09-05 09:20:00", "Duration": 20, '
    '"Average Heart Rate": 95, "Maximum Heart Rate": 110, "Calories Burned": 80, "Exercise Effect Analysis": '
    '"Relaxation achieved", "System Suggestion": "Focus on deep breathing techniques", "Average Pace": NaN, '
    '"Cadence": NaN, "Route": NaN, "Speed Curve": NaN, "Heart Rate Curve": "Breathing Curve 1", "Breathing Rate": '
    '"Relaxation Data 1", "Relaxation State": "8", "Pose Count": "Mindfulness", "Focus Area": NaN, "Distance": NaN, '
    '"Average Speed": NaN, "Elevation Gain": NaN}]}')


def test_workouts_keep_pandas_typing_and_nan(data):
    """The CSV's yoga row has four blanks after the suggestion, not five, so its values sit one column
    early (as pandas reads them): "Relaxation State" gets "8", text because that column also holds
    "85%"; ints stay ints, Cadence is float, blanks are NaN. The 09-07 cycling row lies after now."""
    observation = run(data, JAMES, "2024-09-05 12:00:00", "get_user_recent_workout_records",
                      {"time": "2024-09-05 00:00:00"})
    assert observation == Observation(WORKOUTS_0905, False)
    later = run(data, JAMES, "2024-09-05 12:00:00", "get_user_recent_workout_records", {"time": "2024-09-06 00:00:00"})
    assert later.text == '{"status": "success", "data": []}'  # no "before now" check, as upstream


def test_health_summary_is_newest_first_and_checks_the_time(data):
    rows = csv_rows("database/Health/Health_summary_records_James_Harrington.csv")
    def summary(since: str) -> Observation:
        return run(data, JAMES, "2024-09-06 08:30:00", "get_recent_health_and_mood_summary", {"time": since})

    assert summary("2024-09-05 12:00:00").text == success([rows[5]])  # the 09-06 00:00 summary of the day itself
    assert summary("2024-09-04 00:00:00").text == success([rows[5], rows[4], rows[3]])
    assert summary("2024-09-06 08:30:00") == \
        Observation('{"status": "failure", "message": "The input time should be before the current time"}', True)


@pytest.mark.parametrize("time,message", [
    ("2024-09-05", "time data '2024-09-05' does not match format '%Y-%m-%d %H:%M:%S'"),
    ("2024-09-05 00:00:00Z", "unconverted data remains: Z"),
], ids=["date-only", "trailing-text"])
def test_health_time_errors_are_pythons(data, time, message):
    assert run(data, JAMES, "2024-09-06 08:30:00", "get_recent_health_and_mood_summary", {"time": time}) == \
        Observation(message, True)


# --- music ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,title", [
    ("take five", "Take Five"),  # 20 favourites rows, the most of any title
    ("blue", "Blue in Green"),  # 16 rows, beats All Blues (15) and Rhapsody in Blue (5)
    ("swan", "The Swan"),  # 5 rows each with Swan Lake Suite; The Swan appears first (Amanda_Blake)
    ("MUCHO", "Bésame Mucho"),  # 7 rows against Besame Mucho's 4; non-ASCII kept
], ids=["most-annotated", "highest-count-wins", "tie-first-appearance", "case-and-accents"])
def test_play_music_catalogue_is_the_favourites_union(data, name, title):
    observation = run(data, JAMES, "2024-09-06 07:00:00", "play_music", {"music_name": name, "volume_level": 30})
    expected = dumps({"status": "success", "message": f"Playing: {title} at a volume level: 30"})
    assert observation == Observation(expected, False)


def test_play_music_not_found_is_literal(data):
    observation = run(data, JAMES, "2024-09-06 07:00:00", "play_music",
                      {"music_name": "Song (Live", "volume_level": 30})
    assert observation == Observation(
        '{"status": "failure", "message": "Error: Music track \'Song (Live\' not found in the database."}', True)
    assert len(data.music) == 530


def test_favourites_are_capped_and_e_react_drops_the_first_character(data):
    full = dumps(csv_rows("database/Music/favorites_James_Harrington.csv", ints=("id",)))
    assert len(full) > OBSERVATION_CAP == 8192
    plain = run(data, JAMES, "2024-09-06 07:00:00", "get_music_list_in_favorites")
    e_react = run(data, JAMES, "2024-09-06 07:00:00", "get_music_list_in_favorites", e_react=True)
    assert plain.text == full[:8192] and e_react.text == full[1:8192]
    assert plain.text.startswith('[{"id": 1, "music_type": "jazz", "title": "So What", "artist": "Miles Davis"}, ')
    short = run(data, JAMES, "2024-09-06 07:15:00", "view_today_alarms", e_react=True)
    assert short.text.startswith('{"status"')  # only longer texts lose a character


# --- navigation ----------------------------------------------------------------------------------

def test_accommodations_exact_city_and_nan_filter(data):
    observation = run(data, JAMES, "2024-09-08 13:00:00", "find_accommodations", {"city": "Philadelphia"})
    assert observation.text.startswith(
        '{"status": "success", "data": [{"NAME": "Brooklyn Room in Hip Neighborhood - Close to Train", "price": 742.0, '
        '"room type": "Private room", "house_rules": "No parties & No children under 10 & No smoking", '
        '"minimum nights": 1.0, "maximum occupancy": 1, "review rate number": 1.0, "city": "Philadelphia"}, ')
    assert len(json.loads(observation.text)["data"]) == 13  # 15 rows, two without house rules
    assert "1Bdrm DELUXE" not in observation.text
    assert run(data, JAMES, "2024-09-08 13:00:00", "find_accommodations", {"city": "Philadelphia, PA"}).text == \
        '{"status": "success", "data": []}'


def test_attractions_and_restaurants(data):
    attractions = run(data, JAMES, "2024-09-08 13:00:00", "find_attractions", {"city": "Philadelphia"})
    assert attractions.text.startswith(
        '{"status": "success", "data": [{"Name": "The Franklin Institute", "Latitude": 39.9582109, "Longitude": '
        '-75.17313469999999, "Address": "222 N 20th St, Philadelphia, PA 19103, USA", "Phone": "(215) 448-1200", '
        '"Website": "https://www.fi.edu/?utm_source=google&utm_medium=googlemybusiness&utm_campaign=2021", '
        '"City": "Philadelphia"}, {"Name": "Independence National Historical Park", ')
    assert len(json.loads(attractions.text)["data"]) == 20
    restaurants = run(data, JAMES, "2024-09-08 13:00:00", "find_restaurants", {"city": "Philadelphia"})
    assert restaurants.text.startswith(
        '{"status": "success", "data": [{"Name": "Hong Kong Cafe", "Average Cost": 47, "Cuisines": "Tea, Pizza, '
        'Italian, BBQ, Cafe", "Aggregate Rating": 3.6, "City": "Philadelphia"}, '
        '{"Name": "Red Ginger Sushi, Grill & Bar", ')
    box = Sandbox(data, JAMES, "2024-09-08 13:00:00")
    counts = {city: len(json.loads(box.call("find_restaurants", {"city": city}).text)["data"])
              for city in ("Philadelphia", "Boston", "boston")}
    assert counts == {"Philadelphia": 29, "Boston": 35, "boston": 0}


def test_find_flight_pinned_rows(data):
    """Pins the generator's output: if this changes, change GENERATOR_VERSION."""
    observation = run(data, JAMES, "2024-09-09 19:45:00", "find_flight", {
        "origin_city": "San Francisco", "destination_city": "Philadelphia", "departure_date": "2024-09-09"})
    rows = json.loads(observation.text)["data"]
    assert observation.text.startswith(
        '{"status": "success", "data": [{"Flight Number": "F9658533", "Price": 377, "DepTime": "06:00", "ArrTime": '
        '"14:33", "ActualElapsedTime": "5 hours 33 minutes", "FlightDate": "2024-09-09", "OriginCityName": '
        '"San Francisco", "DestCityName": "Philadelphia", "Distance": 2517.0}, ')
    assert [r["DepTime"][:2] for r in rows] == ["06", "10", "14", "18", "21"]  # an evening flight exists
    assert run(data, JAMES, "2024-09-09 19:45:00", "find_flight", {
        "origin_city": "San Francisco", "destination_city": "Philadelphia", "departure_date": "2024-9-9"}).text == \
        '{"status": "success", "data": []}'


def test_flight_table_follows_its_documented_rules():
    rows = generate_flights()
    assert rows == generate_flights() and len(rows) == 42 * 7 * 5
    assert len({r["Flight Number"] for r in rows}) == len(rows)
    for row in rows:
        origin, destination = CITIES[row["OriginCityName"]], CITIES[row["DestCityName"]]
        miles = round(great_circle_miles(origin, destination))
        hours, _, minutes, _ = row["ActualElapsedTime"].split()
        elapsed = int(hours) * 60 + int(minutes)
        departure = datetime.strptime(row["DepTime"], "%H:%M")
        arrival = departure + timedelta(minutes=elapsed, hours=destination.utc_offset - origin.utc_offset)
        assert list(row) == list(COLUMNS) and row["Distance"] == float(miles)
        assert abs(elapsed - (40 + miles / 500 * 60)) <= 10.5 and arrival.strftime("%H:%M") == row["ArrTime"]
        assert abs(row["Price"] - (0.12 * miles + 80)) <= 25.5 and row["Flight Number"][:2] == "F9"
        assert "2024-09-06" <= row["FlightDate"] <= "2024-09-12"


# --- shopping ------------------------------------------------------------------------------------

def test_view_cart_is_a_bare_list(data):
    assert run(data, ALEXANDER, "2024-09-06 08:30:00", "view_cart_in_shopping_manager").text == (
        '[{"id": 2024090139214, "asin": "B092JHV39L", "product_title": "Eco-Friendly Hiking Backpack", '
        '"product_price": "USD 49.99", "quantity": 1, "category": "Outdoor"}, '
        '{"id": 2024090145629, "asin": "B01LZQG3S8", "product_title": "Organic Cotton Bed Sheets (Queen Size)", '
        '"product_price": "USD 59.99", "quantity": 1, "category": "Home"}, '
        '{"id": 2024090157813, "asin": "B07Q6ZN6T1", "product_title": "The Land Ethic by Aldo Leopold", '
        '"product_price": "USD 14.99", "quantity": 1, "category": "Books"}, {"id": 2024090168923, "asin": "B08K5MJB3", '
        '"product_title": "Local Artisan Cheese", "product_price": "USD 14.50", "quantity": 2, '
        '"category": "Grocery"}]')


def test_add_product_to_cart_always_succeeds_and_changes_nothing(data):
    box = Sandbox(data, ALEXANDER, "2024-09-06 08:30:00", state="app")
    assert box.call("add_product_to_cart", {"product_id": "B0SYN00001", "product_name": "Pot", "quantity": 2}).text == \
        '{"status": "success", "message": "2 of B0SYN00001 added to cart."}'
    assert len(json.loads(box.call("view_cart_in_shopping_manager", {}).text)) == 4


FIRST_CART_ASINS = ["B092JHV39L", "B01LZQG3S8", "B07Q6ZN6T1"]  # Alex_Johnson's cart, first in sorted order


def test_product_search_case_sensitive_tokens_and_zero_score_fill(data):
    """Seven invented titles hold the whitespace token "Pot" (not "Pots", not "pot"); the other
    three of the top ten are zero-score fill in catalogue order: the first cart rows."""
    observation = run(data, JAMES, "2024-09-08 09:35:00", "search_products_in_shopping_manager", {"query": "Pot"})
    products = json.loads(observation.text)["products"]
    assert {p["asin"] for p in products[:7]} == {f"B0SYN{n:05d}" for n in (1, 3, 6, 8, 9, 11, 12)}
    assert [p["asin"] for p in products[7:]] == FIRST_CART_ASINS


def test_product_search_list_takes_three_per_item(data):
    observation = run(data, JAMES, "2024-09-08 09:35:00", "search_products_in_shopping_manager",
                      {"query": ["Laptop", "Tofu"]})
    products = json.loads(observation.text)["products"]
    assert len(products) == 6 and all("Laptop" in p["product_title"].split() for p in products[:3])
    assert [p["asin"] for p in products[3:]] == FIRST_CART_ASINS  # "Tofu," is the catalogue's token, not "Tofu"


def test_product_search_cart_record_and_edge_cases(data):
    observation = run(data, JAMES, "2024-09-08 09:35:00", "search_products_in_shopping_manager",
                      {"query": "Smart Home Speaker"})
    assert observation.text.startswith(
        '{"status": "success", "products": [{"asin": "B092JHV39L", "product_title": "Smart Home Speaker with Voice '
        'Assistant", "product_price": "$129.99", "product_original_price": NaN, "currency": "USD", '
        '"product_star_rating": NaN, "product_num_ratings": NaN, '
        '"product_url": "https://www.example.com/dp/B092JHV39L", "sales_volume": NaN, "delivery": NaN, '
        '"has_variations": false}, ')
    assert run(data, JAMES, "2024-09-08 09:35:00", "search_products_in_shopping_manager", {"query": []}) == \
        Observation('{"status": "No products found for \'[]\'", "products": []}', False)
    assert run(data, JAMES, "2024-09-08 09:35:00", "search_products_in_shopping_manager", {"query": {"q": 1}}) == \
        Observation("'dict' object has no attribute 'split'", True)


def test_product_catalogue_file_is_frozen_and_covers_the_families():
    lines = [json.loads(line) for line in PRODUCTS_FILE.read_text(encoding="utf-8").splitlines()]
    families = {}
    for item in lines:
        families[item["family"]] = families.get(item["family"], 0) + 1
    assert PRODUCTS_FILE.name == f"{SUBSTITUTE_VERSIONS['search_products_in_shopping_manager']}.jsonl"
    assert set(families) == {"cookware", "laptops", "vegetables", "fruits", "books-2024", "party-bbq",
                             "healthy-snacks", "plant-protein", "movie-night", "cart-alternatives"}
    assert min(families.values()) >= 10 and len({item["asin"] for item in lines}) == len(lines)


# --- smart home ----------------------------------------------------------------------------------

@pytest.mark.parametrize("tool,arguments,expected", [
    ("control_light_in_home", {"action": "on", "location": "Living Room", "brightness": 2, "color": "white"},
     '{"status": "success", "message": "Light in living room is now ON with brightness 2 and color white."}'),
    ("control_light_in_home", {"action": "on", "location": "kitchen", "brightness": 2.0, "color": "white-yellow"},
     '{"status": "success", "message": "Light in kitchen is now ON with brightness 2.0 and color white-yellow."}'),
    ("control_light_in_home", {"action": "off", "location": "bedroom"},
     '{"status": "success", "message": "Light in bedroom is now OFF."}'),
    ("control_light_in_home", {"action": "On", "location": "kitchen"}, "The action must be 'on' or 'off'."),
    ("control_light_in_home", {"action": "on", "location": ""}, "Location must be specified."),
    ("control_light_in_home", {"action": "on", "location": "garage"},
     "Invalid location. Supported locations are: residence, kitchen, dining room, living room, bedroom, bathroom."),
    ("control_light_in_home", {"action": "on", "location": "kitchen", "brightness": "2"},
     "Brightness level must be 1 (low), 2 (medium), or 3 (high)."),
    ("control_light_in_home", {"action": "on", "location": "kitchen", "color": "red"},
     "Color must be 'yellow', 'white' or 'white-yellow'."),
    ("control_light_in_home", {"action": "on", "location": "kitchen", "brightness": None},
     "Both brightness and color must be provided when turning the light on."),
    ("control_curtains_in_home", {"open": "True"}, '{"status": "success", "message": "Curtains opened."}'),
    ("control_curtains_in_home", {"open": "False"}, '{"status": "success", "message": "Curtains closed."}'),
    ("control_curtains_in_home", {"open": "true"}, "The open must be 'True' or 'False'."),
    ("control_curtains_in_home", {"open": True}, "'bool' object has no attribute 'capitalize'"),
    ("control_bathtub_in_home", {"fill": "true", "water_level": 30, "temperature": 40},
     '{"status": "success", "message": {"operation": "fill up the bathtub", "temperature": 40, "water_level": 30}}'),
    ("control_bathtub_in_home", {"fill": "False", "temperature": 40},
     '{"status": "success", "message": {"operation": "drain the bathtub", "temperature": null, "water_level": null}}'),
    ("control_bathtub_in_home", {"fill": "maybe"}, "The fill must be 'True' or 'False'."),
    ("control_bathtub_in_home", {"fill": "True", "keep_temperature": "yes"},
     "The keep_temperature must be 'True' or 'False'."),
    ("boil_water_in_home", {"temperature": 101},
     '{"status": "failure", "message": "Error: Temperature exceeds boiling point of water."}'),
    ("boil_water_in_home", {"temperature": 90, "keep_temperature": "True"},
     '{"status": "success", "message": "Water is boiling at 90°C, and will maintain this temperature."}'),
    ("boil_water_in_home", {"temperature": 100}, '{"status": "success", "message": "Water has boiled at 100°C."}'),
    ("boil_water_in_home", {"temperature": "90"}, "'>' not supported between instances of 'str' and 'int'"),
    ("set_temperature_and_humidity_in_home", {"temperature": 24},
     '{"status": "success", "message": "Current temperature set to 24°C."}'),
    ("set_temperature_and_humidity_in_home", {"temperature": 24, "humidity": 45},
     '{"status": "success", "message": "Current temperature set to 24°C and current humidity set to 45%."}'),
    ("set_temperature_and_humidity_in_home", {"humidity": 45},
     '{"status": "success", "message": "Current temperature set to None°C and current humidity set to 45%."}'),
    ("get_home_temperature_and_humidity", {"at_time": "2024-09-08 17:45:00"},
     '{"status": "success", "message": "Current Temperature: 24.3°C, Current Humidity: 28%."}'),
    ("get_home_temperature_and_humidity", {"at_time": "2024-09-08 17:00:00"},  # strictly before: the 16:00 hour
     '{"status": "success", "message": "Current Temperature: 24.4°C, Current Humidity: 28%."}'),
    ("get_home_temperature_and_humidity", {"at_time": "2024-09-08 00:00:00"}, "'NoneType' object is not subscriptable"),
    ("get_home_temperature_and_humidity", {"at_time": "2024-09-13 10:00:00"}, "'2024-09-13'"),
], ids=["light-on", "light-float-brightness", "light-off", "light-bad-action", "light-empty-location",
        "light-bad-location", "light-string-brightness", "light-bad-color", "light-null-brightness",
        "curtains-open", "curtains-close", "curtains-lowercase", "curtains-bool", "bathtub-fill", "bathtub-drain",
        "bathtub-bad-fill", "bathtub-bad-keep", "kettle-too-hot", "kettle-keep", "kettle-boil", "kettle-string",
        "thermostat-temperature", "thermostat-both", "thermostat-humidity-only", "home-climate-spec",
        "home-climate-on-the-hour", "home-climate-midnight", "home-climate-no-data"])
def test_smart_home(data, tool, arguments, expected):
    """New York's 2024-09-08 hours: 16:00 22.4 °C / 25 %, 17:00 22.3 °C / 25 % (+2 °C, +3 %)."""
    failed = not expected.startswith('{"status": "success"')
    assert run(data, JAMES, "2024-09-08 17:45:00", tool, arguments) == Observation(expected, failed)


@pytest.mark.parametrize("at_time, why", [
    ("2024-09-08", "time data '2024-09-08' does not match format '%Y-%m-%d %H:%M:%S'"),
    (5, "strptime() argument 1 must be str, not int"),
], ids=["wrong_format", "a_number"])
def test_home_climate_bad_time_fills_both_slots_of_the_sentence_with_the_error(data, at_time, why):
    """Correction 8: upstream catches every failure of the time and puts its error dict into both
    slots of the usual sentence."""
    observation = run(data, JAMES, "2024-09-08 17:45:00", "get_home_temperature_and_humidity", {"at_time": at_time})
    inner = {"status": "error", "message": f"the at_time format not right: {why}"}
    message = f"Current Temperature: {inner}°C, Current Humidity: {inner}%."
    assert observation == Observation(dumps({"status": "success", "message": message}), True)


def test_home_climate_looks_the_day_up_as_written(data):
    """An unpadded date parses, then its day is looked up by the text before the space."""
    assert run(data, JAMES, "2024-09-08 17:45:00", "get_home_temperature_and_humidity",
               {"at_time": "2024-9-8 17:45:00"}) == Observation("'2024-9-8'", True)


# --- weather -------------------------------------------------------------------------------------

def day_without_hours(city: str, date: str) -> dict[str, Any]:
    weather = json.loads((ETAPP / "database/Weather/weather_new.json").read_text(encoding="utf-8"))
    return {k: v for k, v in weather[city][date]["forecast"]["forecastday"][0].items() if k != "hour"}


def test_today_weather(data):
    observation = run(data, ALEXANDER, "2024-09-06 07:15:00", "get_today_weather", {"location": "Boston"})
    assert observation == Observation(success(day_without_hours("Boston", "2024-09-06")), False)
    assert 700 < len(observation.text) < 800
    assert run(data, ALEXANDER, "2024-09-06 07:15:00", "get_today_weather", {"location": "Boston, MA"}) == \
        Observation('{"status": "error", "message": "Location not found"}', True)
    assert run(data, ALEXANDER, "2024-09-13 07:15:00", "get_today_weather", {"location": "Boston"}).text == \
        '{"status": "error", "message": "Time not found for the given location"}'


@pytest.mark.parametrize("arguments,expected", [
    ({"location": "Boston", "start_time": "2024-09-07", "end_time": "2024-09-09"}, "07-only"),
    ({"location": "Boston", "start_time": "2024-09-07", "end_time": "2024-09-06"}, "null"),
    ({"location": "Boston", "start_time": "2024-09-20", "end_time": "2024-09-21"},
     '{"status": "error", "message": "start_Time not found for the given location"}'),
    ({"location": "Boston", "start_time": "09/07/2024", "end_time": "2024-09-08"},
     "time data '09/07/2024' does not match format '%Y-%m-%d'"),
    ({"location": "Boston", "start_time": "2024-09-07 00:00:00", "end_time": "2024-09-08"},
     "unconverted data remains:  00:00:00"),
    ({"location": "Gotham", "start_time": "2024-09-07", "end_time": "tomorrow"},
     '{"status": "error", "message": "Location not found"}'),
    ({"location": "Boston", "start_time": "2024-09-07", "end_time": "tomorrow"},
     "time data 'tomorrow' does not match format '%Y-%m-%d'"),
    ({"location": "Boston", "start_time": "2024-09-07"}, "WeatherData.get_future_weather() missing 1 required "
                                                         "positional argument: 'end_time'"),
], ids=["range-gives-start-day-only", "end-before-start", "start-outside-data", "bad-start", "start-with-time",
        "location-checked-before-end", "bad-end", "missing-end"])
def test_future_weather(data, arguments, expected):
    observation = run(data, ALEXANDER, "2024-09-06 07:15:00", "get_future_weather", arguments)
    if expected == "07-only":
        assert observation == Observation(success([day_without_hours("Boston", "2024-09-07")]), False)
    else:
        assert observation == Observation(expected, expected != "null")


def test_future_weather_asked_twice_succeeds_both_times(data):
    """Correction 9: upstream's removal of the hourly data tolerates a repeat, in any state."""
    arguments = {"location": "Boston", "start_time": "2024-09-06", "end_time": "2024-09-06"}
    for state in ("tool", "app"):
        box = Sandbox(data, ALEXANDER, "2024-09-06 07:15:00", state=state)
        first = box.call("get_future_weather", arguments)
        assert first.error is False and box.call("get_future_weather", arguments) == first
        assert box.call("get_today_weather", {"location": "Boston"}).error is False


# --- web browsing --------------------------------------------------------------------------------

def news() -> list[dict[str, Any]]:
    return json.loads((ETAPP / "database/Web_Browsing/news_data.json").read_text(encoding="utf-8"))


def test_news_by_category_and_hot_news(data):
    groups = {group["category"]: group for group in news()}
    assert run(data, JAMES, "2024-09-08 09:30:00", "search_news_by_category", {"category": "sport"}).text == \
        success(groups["sport"])
    assert run(data, JAMES, "2024-09-08 09:30:00", "search_news_by_category", {"category": "hot"}).error is False
    assert run(data, JAMES, "2024-09-08 09:30:00", "search_news_by_category", {"category": "Sport"}) == \
        Observation('{"status": "error", "message": "The query Sport is not in defined category"}', True)
    assert run(data, JAMES, "2024-09-08 09:30:00", "search_heat_news").text == success(groups["hot"]["news"])


def test_wikipedia_fails_honestly(data):
    assert run(data, JAMES, "2024-09-08 21:00:00", "search_from_wikipedia", {"query": "popular books", "topk": 3}) == \
        Observation('{"status": "failure", "message": "search_from_wikipedia is unavailable in this offline sandbox"}',
                    True)


# --- tool retrieval ------------------------------------------------------------------------------

def config(name: str) -> dict[str, Any]:
    for app in APPS:
        for entry in json.loads((ETAPP / "toolkit" / app.folder / "config.json").read_text(encoding="utf-8")):
            if entry["function"]["name"] == name:
                return entry
    raise KeyError(name)


def test_search_tools_corpus_is_upstreams_45_entries(data):
    corpus = tool_corpus(data)
    texts = [text for _, text in corpus]
    assert len(corpus) == 45 and len({name for name, _ in corpus}) == 33
    assert sum(name == "control_light_in_home" for name, _ in corpus) == 3
    for prefix in ("health monitoring app.get_current_health_and_mood_status:", "e commerce.add_product_to_cart:",
                   "navigation_ and_ map.find_flight:", "thermostat.control_light_in_home:",
                   "light.control_light_in_home:", "smart appliance.control_light_in_home:"):
        assert any(text.startswith(prefix) for text in texts), prefix


def test_search_tools_ranks_with_upstreams_minilm_and_merges_in_first_appearance_order(data):
    """Upstream's MiniLM through ONNX Runtime, its top-K loop, its failure shapes (correction 10:
    `"output": null`, K of 0 fails on min())."""
    box = Sandbox(data, JAMES, "2024-09-06 07:00:00")
    found = json.loads(box.call("search_tools", {"keywords": "alarm"}).text)
    assert found["output"] == ["add_alarm", "view_today_alarms", "control_curtains_in_home"]
    assert found["input"] == {"keywords": "alarm"} and found["exception"] is None and found["status"] == "success"
    merged = json.loads(box.call("search_tools", {"keywords": ["alarm", "alarms"]}).text)["output"]
    assert merged == found["output"], "each name once, in order of first appearance"
    assert json.loads(box.call("search_tools", {"keywords": "weather", "K": 1}).text)["output"] == ["get_future_weather"]
    assert box.call("search_tools", {"keywords": 5}) == Observation(
        '{"status": "failure", "input": {"keywords": 5}, "output": null, '
        '"exception": "\'int\' object is not iterable"}', True)
    assert json.loads(box.call("search_tools", {"keywords": "alarm", "K": 0}).text)["exception"] == \
        "min() arg is an empty sequence"


def test_get_tool_doc_registry_order_and_retrieval_preferences(data):
    request = {"tools_name": ["get_today_weather", "send_email", "search_tools", "no_such_tool"]}
    docs = {"send_email": config("send_email"), "get_today_weather": config("get_today_weather")}
    assert run(data, JAMES, "2024-09-06 07:00:00", "get_tool_doc", request).text == success(docs)
    profile = json.loads((ETAPP / "profile/concrete_profile/profile_James_Harrington.json").read_text(encoding="utf-8"))
    retrieval = run(data, JAMES, "2024-09-06 07:00:00", "get_tool_doc", request, retrieval=True)
    assert retrieval == Observation(repr({"status": "success", "data": docs})
                                    + "\nCorresponding preferences related to the tools you retrieve:\n"
                                    + repr([profile["email"]]), False)
    every = run(data, JAMES, "2024-09-06 07:00:00", "get_tool_doc", {"tools_name": list(TOOL_NAMES)}, retrieval=True)
    assert len(every.text) > OBSERVATION_CAP  # not cut in retrieval mode
    assert run(data, JAMES, "2024-09-06 07:00:00", "get_tool_doc", {"tools_name": "get_tool_doc"}).text == success({})


# --- executor errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("name,arguments,expected", [
    ("book_flight", {}, "invalid tool name book_flight."),
    ("add_event_in_calendar", {"title": "t", "description": "d", "start_time": "2024-09-06 09:00:00"},
     "Calendar.add_event_in_calendar() missing 1 required positional argument: 'end_time'"),
    ("add_event_in_calendar", {"title": "t", "description": "d", "start_time": "2024-09-06 09:00:00",
                               "end_time": "2024-09-06 10:00:00", "x": 1},
     "Calendar.add_event_in_calendar() got an unexpected keyword argument 'x'"),
    ("add_event_in_calendar", {"title": "t", "description": "d", "start_time": "2024/09/06 09:00",
                               "end_time": "2024-09-06 10:00:00"},
     "time data '2024/09/06 09:00' does not match format '%Y-%m-%d %H:%M:%S'"),
    ("view_today_alarms", ["not", "a", "dict"],
     "PLA.toolkit.tool_manager.ToolManager.api_call() argument after ** must be a mapping, not list"),
    ("find_flight", None,
     "PLA.toolkit.tool_manager.ToolManager.api_call() argument after ** must be a mapping, not NoneType"),
    ("get_recent_health_and_mood_summary", {"time": 5}, "strptime() argument 1 must be str, not int"),
], ids=["unknown-tool", "missing-argument", "unexpected-keyword", "bad-date", "list-arguments", "null-arguments",
        "wrong-type"])
def test_executor_errors_are_pythons_messages(data, name, arguments, expected):
    box = Sandbox(data, JAMES, "2024-09-06 07:15:00")
    assert box.call(name, arguments) == Observation(expected, True)


# --- data loading and validation ---------------------------------------------------------------

def test_real_data_has_no_problems_for_any_user(data):
    assert SandboxData.problems(ETAPP, TRAVELPLANNER, list(data.users)) == []
    assert len(data.users) == 16 and data.users[0] == JAMES


def test_problems_name_every_missing_file_and_the_fix(tmp_path, etapp_data):
    root = tmp_path / "etapp"
    shutil.copytree(ETAPP / "profile", root / "profile")
    shutil.copytree(ETAPP / "toolkit", root / "toolkit")
    shutil.copytree(ETAPP / "database" / "Shopping", root / "database" / "Shopping")
    (root / "database" / "Shopping" / "carts_John_Doe.csv").write_text("id,asin\n1,x\n")
    found = SandboxData.problems(root, tmp_path / "nowhere", [JAMES, "Nobody"])
    text = "\n".join(found)
    for missing in ("weather_new.json", "news_data.json", "clean_accommodations_2022_revise.csv", "attractions.csv",
                    "clean_restaurant_2022.csv", "favorites_Sarah_Johnson.csv", "events_James_Harrington.csv",
                    "Workout_records_James_Harrington.csv"):
        assert f"{missing}: missing;" in text, missing
    assert "carts_John_Doe.csv: header ['id', 'asin'] is not the expected" in text
    assert "user 'Nobody' is not in" in text and "dataset.travelplanner" in text
    with pytest.raises(DatasetError, match="weather_new.json: missing"):
        SandboxData.load(root, tmp_path / "nowhere")


def test_sandbox_rejects_bad_user_time_and_state(data):
    with pytest.raises(DatasetError, match="James_Harrington"):
        Sandbox(data, "James Harrington", "2024-09-06 07:15:00")
    with pytest.raises(DatasetError, match="2024-09-06T07:15"):
        Sandbox(data, JAMES, "2024-09-06T07:15")
    with pytest.raises(ConfigError, match="'sequential'"):
        Sandbox(data, JAMES, "2024-09-06 07:15:00", state="sequential")


def test_bm25_matches_a_hand_computed_score_and_the_idf_floor():
    index = BM25Okapi([["a", "b"], ["a", "c"], ["a", "d", "d"]])
    idf_rare = math.log(2.5) - math.log(1.5)  # b, c, d: in 1 of 3 documents
    idf_a = math.log(0.5) - math.log(3.5)  # in every document: negative, so floored
    assert index.idf["a"] == pytest.approx(0.25 * (idf_a + 3 * idf_rare) / 4)
    norm = 2 + 1.5 * (1 - 0.75 + 0.75 * 3 / (7 / 3))  # tf 2, length 3, mean length 7/3
    assert index.scores(["d"]) == pytest.approx([0, 0, idf_rare * 2 * 2.5 / norm])
    assert top_indices([0.0, 1.0, 0.0, 1.0], 3) == [1, 3, 0]  # ties keep corpus order
