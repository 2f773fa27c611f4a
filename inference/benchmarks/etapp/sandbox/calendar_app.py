"""Calendar (spec section 1.1): events and alarms of one user, changed only in this instance's copy."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from inference.benchmarks.etapp.sandbox.core import DATE_FORMAT, TIME_FORMAT, Env, contains, new_id, records

CONFLICT = "The new event is conflicting with other events in Calendar."


def _times(column: pd.Series) -> pd.Series:
    return pd.to_datetime(column, format=TIME_FORMAT)


def _append(frame: pd.DataFrame, row: dict[str, Any]) -> pd.DataFrame:
    # Object columns, as upstream's appended rows leave them: a string id beside int ids, a Timestamp
    # reminder beside text (never re-inferred as a datetime column), a non-string alarm_time that
    # later breaks the substring mask.
    return pd.DataFrame([*frame.to_dict(orient="records"), row], columns=frame.columns, dtype=object)


class Calendar:
    """Upstream's Calendar class: same method and parameter names, so Python words the errors."""

    TOOLS = ("add_event_in_calendar", "view_today_events_in_calendar",
             "view_events_in_calendar_by_providing_time_range", "delete_event_in_calendar", "add_alarm",
             "view_today_alarms")

    def __init__(self, env: Env) -> None:
        self._env = env
        self._events = env.data.table(env.user, "events").copy()
        self._alarms = env.data.table(env.user, "alarms").copy()
        self._issued = 0

    def _next_id(self) -> str:
        self._issued += 1
        return new_id(self._env.clock, self._issued - 1)

    def add_event_in_calendar(self, title, description, start_time, end_time, reminder=None):
        start = datetime.strptime(start_time, TIME_FORMAT)
        end = datetime.strptime(end_time, TIME_FORMAT)
        # Stored as a pandas Timestamp, as upstream: a later view that shows this event cannot be
        # serialised ("Object of type Timestamp is not JSON serializable"), visible in app state only.
        alert = None if reminder is None else pd.Timestamp(datetime.strptime(reminder, TIME_FORMAT))
        if end <= start:
            raise ValueError("End time must be after start time.")
        starts, ends = _times(self._events["start_time"]), _times(self._events["end_time"])
        if ((starts < end) & (ends > start)).any():
            return {"status": "failure", "error message": CONFLICT}
        self._events = _append(self._events, {
            "id": self._next_id(), "title": title, "description": description,
            "start_time": start.strftime(TIME_FORMAT), "end_time": end.strftime(TIME_FORMAT), "reminder": alert})
        return {"status": "success", "message": "Event added successfully."}

    def view_today_events_in_calendar(self):
        today = contains(self._events["start_time"], self._env.clock.date)
        return {"status": "success", "data": records(self._events[today])}

    def view_events_in_calendar_by_providing_time_range(self, start_time, end_time):
        start = datetime.strptime(start_time, DATE_FORMAT)
        end = datetime.strptime(end_time, DATE_FORMAT)
        starts = _times(self._events["start_time"])
        if start == end:
            inside = (starts >= start) & (starts < start + timedelta(days=1))
        else:
            # Upstream's end bound is the end date at 00:00, inclusive: later events that day are missed.
            inside = (starts >= start) & (starts <= end)
        return {"status": "success", "data": records(self._events[inside])}

    def delete_event_in_calendar(self, event_id):
        matching = self._events["id"] == event_id
        if not matching.any():
            return {"status": "failure", "message": f"Event id {event_id} is not found"}
        self._events = self._events[~matching].reset_index(drop=True)
        return {"status": "success", "message": "Event deleted successfully."}

    def add_alarm(self, alarm_time, message):
        self._alarms = _append(self._alarms, {"id": self._next_id(), "alarm_time": alarm_time, "message": message})
        return {"status": "success", "message": "Alarm added successfully"}

    def view_today_alarms(self):
        today = contains(self._alarms["alarm_time"], self._env.clock.date)
        return {"status": "success", "data": records(self._alarms[today])}
