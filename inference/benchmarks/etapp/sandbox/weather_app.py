"""Weather (spec section 1.8): today's and a future day's forecast for the 7 cities."""

from __future__ import annotations

from datetime import datetime

from inference.benchmarks.etapp.sandbox.core import DATE_FORMAT, Env


class WeatherData:
    """Upstream's WeatherData class: same method and parameter names, so Python words the errors.

    Upstream drops the hourly list from the day it returns, and its removal tolerates a repeat: the
    same city and date asked twice in one state succeeds both times (spec correction 9)."""

    TOOLS = ("get_today_weather", "get_future_weather")

    def __init__(self, env: Env) -> None:
        self._env = env
        self._weather = env.data.weather

    def _day(self, location: str, date: str) -> dict:
        day = self._weather[location][date]["forecast"]["forecastday"][0]
        return {key: value for key, value in day.items() if key != "hour"}

    def get_today_weather(self, location):
        if location not in self._weather:
            return {"status": "error", "message": "Location not found"}
        today = self._env.clock.date
        if today not in self._weather[location]:
            return {"status": "error", "message": "Time not found for the given location"}
        return {"status": "success", "data": self._day(location, today)}

    def get_future_weather(self, location, start_time, end_time):
        start = datetime.strptime(start_time, DATE_FORMAT)
        if location not in self._weather:
            return {"status": "error", "message": "Location not found"}
        # The start date is looked up as written (correction 9): an unpadded "2024-9-8" parses but is
        # not a key, so it is "not found" although the padded day exists.
        if start_time not in self._weather[location]:
            return {"status": "error", "message": "start_Time not found for the given location"}
        end = datetime.strptime(end_time, DATE_FORMAT)
        if end < start:
            return None  # upstream's loop never runs and the method returns nothing: null
        # Upstream returns inside its loop over the range: only the start date, whatever the end.
        return {"status": "success", "data": [self._day(location, start_time)]}
