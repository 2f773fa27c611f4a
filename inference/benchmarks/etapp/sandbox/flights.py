"""A synthetic flight table for `find_flight`, whose upstream data (`clean_Flights_revise.csv`)
was never published (spec section 1.12). The content is invented; only the schema (TravelPlanner's
flight columns) and the rules below are meant to be plausible.

Generator (GENERATOR_VERSION names this exact procedure; change the version with any change):
- Cities: the 7 ETAPP home/destination cities in CITIES, with city-centre coordinates and their
  September (daylight-saving) UTC offsets.
- Pairs: every ordered pair of distinct cities (42), in CITIES order, origin first.
- Dates: 2024-09-06 .. 2024-09-12, every day, in order.
- Slots: 5 departures a day at 06, 10, 14, 18 and 21 h (so an evening flight exists, as
  instruction 4 needs); the minute is drawn from {0, 5, ..., 55}.
- Distance: great-circle miles between the coordinates (haversine, R = 3958.8 mi), rounded to a
  whole number and stored as a float, as TravelPlanner's table does.
- Duration: 40 min of taxi and climb plus the distance at 500 mph, plus a drawn -10..+10 min;
  `ActualElapsedTime` reads "H hours M minutes".
- Times: DepTime is local at the origin, ArrTime local at the destination (departure + duration +
  the offset difference), both "HH:MM"; an arrival after midnight wraps, with no date, as in
  TravelPlanner's table.
- Price: round(0.12 * miles + 80 + a drawn -25..+25), an integer number of dollars.
- Flight Number: "F9" + a drawn 6-digit number, unique in the table.
Draws come from one `random.Random(SEED)` in the loop order above (minute, duration noise, price
noise, number), so the table is identical on every machine and Python version.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

GENERATOR_VERSION = "flights-v1"
SEED = 20240906
COLUMNS = ("Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate",
           "OriginCityName", "DestCityName", "Distance")
"""find_flight's columns, in upstream's order."""
FIRST_DATE, DAYS = date(2024, 9, 6), 7
SLOTS = (6, 10, 14, 18, 21)
EARTH_RADIUS_MILES = 3958.8


@dataclass(frozen=True)
class City:
    latitude: float
    longitude: float
    utc_offset: int
    """Hours from UTC in September 2024 (daylight-saving time)."""


CITIES: dict[str, City] = {
    "San Francisco": City(37.7749, -122.4194, -7),
    "Chicago": City(41.8781, -87.6298, -5),
    "New York": City(40.7128, -74.0060, -4),
    "Los Angeles": City(34.0522, -118.2437, -7),
    "Boston": City(42.3601, -71.0589, -4),
    "Seattle": City(47.6062, -122.3321, -7),
    "Philadelphia": City(39.9526, -75.1652, -4),
}


def great_circle_miles(a: City, b: City) -> float:
    """Haversine distance between two coordinates, in statute miles."""
    lat1, lat2 = math.radians(a.latitude), math.radians(b.latitude)
    dlat, dlon = lat2 - lat1, math.radians(b.longitude - a.longitude)
    h = math.sin(dlat / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin(dlon / 2) ** 2
    return 2 * EARTH_RADIUS_MILES * math.asin(math.sqrt(h))


def _flight(rng: random.Random, numbers: set[str], origin: str, destination: str, day: date,
            hour: int, miles: int) -> dict[str, Any]:
    departure = datetime(day.year, day.month, day.day, hour, rng.randrange(0, 60, 5))
    minutes = round(40 + miles / 500 * 60) + rng.randint(-10, 10)
    shift = CITIES[destination].utc_offset - CITIES[origin].utc_offset
    arrival = departure + timedelta(minutes=minutes, hours=shift)
    price = round(0.12 * miles + 80 + rng.randint(-25, 25))
    number = f"F9{rng.randint(100000, 999999)}"
    while number in numbers:
        number = f"F9{rng.randint(100000, 999999)}"
    numbers.add(number)
    return dict(zip(COLUMNS, (number, price, departure.strftime("%H:%M"), arrival.strftime("%H:%M"),
                              f"{minutes // 60} hours {minutes % 60} minutes", day.isoformat(),
                              origin, destination, float(miles))))


def generate_flights() -> tuple[dict[str, Any], ...]:
    """The whole table (42 pairs x 7 days x 5 slots = 1470 rows), in generation order."""
    rng, numbers, rows = random.Random(SEED), set(), []
    for origin, start in CITIES.items():
        for destination, end in CITIES.items():
            if destination == origin:
                continue
            miles = round(great_circle_miles(start, end))
            for offset in range(DAYS):
                day = FIRST_DATE + timedelta(days=offset)
                rows.extend(_flight(rng, numbers, origin, destination, day, hour, miles) for hour in SLOTS)
    return tuple(rows)
