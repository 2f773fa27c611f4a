"""Navigation (spec section 1.5): accommodations, attractions, restaurants (TravelPlanner's table)
and flights (the synthetic table of flights.py), matched by exact, case-sensitive city name."""

from __future__ import annotations

from typing import Any

import pandas as pd

from inference.benchmarks.etapp.sandbox.core import Env, records

ACCOMMODATION_COLUMNS = ["NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy",
                         "review rate number", "city"]
ATTRACTION_COLUMNS = ["Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"]
RESTAURANT_COLUMNS = ["Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"]


def _in_city(frame: pd.DataFrame, column: str, city: Any, columns: list[str]) -> dict[str, Any]:
    # The frames arrive with upstream's NaN filter applied (SandboxData); an unknown city is no error.
    chosen = frame[frame[column] == city][columns].reset_index(drop=True)
    return {"status": "success", "data": records(chosen)}


class Navigation_And_Map:  # noqa: N801 -- upstream's class name, shown in Python's error messages
    """Upstream's Navigation_And_Map class: same method and parameter names, so Python words the errors."""

    TOOLS = ("find_accommodations", "find_attractions", "find_restaurants", "find_flight")

    def __init__(self, env: Env) -> None:
        self._data = env.data

    def find_accommodations(self, city):
        return _in_city(self._data.accommodations, "city", city, ACCOMMODATION_COLUMNS)

    def find_attractions(self, city):
        return _in_city(self._data.attractions, "City", city, ATTRACTION_COLUMNS)

    def find_restaurants(self, city):
        return _in_city(self._data.restaurants, "City", city, RESTAURANT_COLUMNS)

    def find_flight(self, origin_city, destination_city, departure_date):
        wanted = (origin_city, destination_city, departure_date)
        rows = [dict(row) for row in self._data.flights
                if (row["OriginCityName"], row["DestCityName"], row["FlightDate"]) == wanted]
        return {"status": "success", "data": rows}
