"""Health (spec section 1.3): hourly readings, daily summaries and workouts of one user, read-only."""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from inference.benchmarks.etapp.sandbox.core import TIME_FORMAT, Env, records


def _times(column: pd.Series) -> pd.Series:
    return pd.to_datetime(column, format=TIME_FORMAT)


class HealthMonitoringApp:
    """Upstream's HealthMonitoringApp class: same method and parameter names, so Python words the errors."""

    TOOLS = ("get_current_health_and_mood_status", "get_user_recent_workout_records",
             "get_recent_health_and_mood_summary")

    def __init__(self, env: Env) -> None:
        self._env = env
        self._readings = env.data.table(env.user, "health")
        self._summaries = env.data.table(env.user, "health_summary")
        self._workouts = env.data.table(env.user, "workouts")

    def get_current_health_and_mood_status(self):
        past = self._readings[_times(self._readings["timestamp"]) <= self._env.clock.moment]
        return {"status": "success", "data": records(past.tail(1))}

    def get_user_recent_workout_records(self, time):
        since = datetime.strptime(time, TIME_FORMAT)
        starts = _times(self._workouts["Start Time"])
        # No check that `time` is before now, as upstream: a later time gives an empty list.
        return {"status": "success",
                "data": records(self._workouts[(starts >= since) & (starts <= self._env.clock.moment)])}

    def get_recent_health_and_mood_summary(self, time):
        since = datetime.strptime(time, TIME_FORMAT)
        now = self._env.clock.moment
        if since >= now:
            return {"status": "failure", "message": "The input time should be before the current time"}
        dates = _times(self._summaries["date"])
        newest = dates[(dates >= since) & (dates <= now)].sort_values(ascending=False, kind="stable")
        return {"status": "success", "data": records(self._summaries.loc[newest.index])}
