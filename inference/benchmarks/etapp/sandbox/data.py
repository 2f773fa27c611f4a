"""The files the ETAPP sandbox reads, where they live, and the shared read-only tables.

Shared tables (weather, news, navigation, catalogues, tool schemas) load once per run; a user's
own tables load on first use and are cached. Apps that change a table copy it first, so the cache
stays as the CSV was. CSVs are read with pandas' defaults, because the observations show its
typing (ints stay ints, blanks become NaN, `None` text becomes NaN).
"""

from __future__ import annotations

import csv
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from inference.benchmarks.etapp.apps import APPS
from inference.benchmarks.etapp.sandbox.catalogues import PRODUCTS_FILE, Track, music_catalogue, product_catalogue
from inference.benchmarks.etapp.sandbox.flights import generate_flights
from inference.benchmarks.etapp.sandbox.tool_names import TOOL_NAMES
from inference.errors import DatasetError


@dataclass(frozen=True)
class TableFile:
    path: str
    """Relative to its data root; `{user}` is the user's file stem."""
    columns: tuple[str, ...]
    """The header row, exactly (the first one is empty in TravelPlanner-style index columns)."""


USER_TABLES: dict[str, TableFile] = {
    "events": TableFile("database/Calendar/events/events_{user}.csv",
                        ("id", "title", "description", "start_time", "end_time", "reminder")),
    "alarms": TableFile("database/Calendar/alarms/alarms_{user}.csv", ("id", "alarm_time", "message")),
    "emails": TableFile("database/Email/emails_{user}.csv",
                        ("id", "sender", "receiver", "subject", "content", "timestamp", "status",
                         "read_status", "attachments")),
    "health": TableFile("database/Health/Health_records_{user}.csv",
                        ("timestamp", "steps", "distance_travelled", "calories_burned", "sleep_status",
                         "sleep_hours", "body_temperature", "blood_pressure", "heart_rate",
                         "blood_oxygen_saturation", "mood", "stress_level")),
    "health_summary": TableFile("database/Health/Health_summary_records_{user}.csv",
                                ("date", "activity", "sleep", "vital_signs", "mental_wellbeing",
                                 "recommendations")),
    "workouts": TableFile("database/Health/Workout_records_{user}.csv",
                          ("Activity Type", "Start Time", "End Time", "Duration", "Average Heart Rate",
                           "Maximum Heart Rate", "Calories Burned", "Exercise Effect Analysis",
                           "System Suggestion", "Average Pace", "Cadence", "Route", "Speed Curve",
                           "Heart Rate Curve", "Breathing Rate", "Relaxation State", "Pose Count",
                           "Focus Area", "Distance", "Average Speed", "Elevation Gain")),
    "favorites": TableFile("database/Music/favorites_{user}.csv", ("id", "music_type", "title", "artist")),
    "cart": TableFile("database/Shopping/carts_{user}.csv",
                      ("id", "asin", "product_title", "product_price", "quantity", "category")),
}
ACCOMMODATIONS = TableFile("database/Navigation/accommodations/clean_accommodations_2022_revise.csv",
                           ("", "NAME", "room type", "price", "minimum nights", "review rate number",
                            "house_rules", "maximum occupancy", "city"))
ATTRACTIONS = TableFile("database/Navigation/attractions/attractions.csv",
                        ("Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"))
RESTAURANTS = TableFile("database/restaurants/clean_restaurant_2022.csv",
                        ("", "Name", "City", "Cuisines", "Average Cost", "Aggregate Rating"))
"""Relative to the TravelPlanner folder, not the ETAPP root."""
PROFILES = "profile/profiles.json"
CONCRETE_PROFILE = "profile/concrete_profile/profile_{user}.json"
WEATHER = "database/Weather/weather_new.json"
NEWS = "database/Web_Browsing/news_data.json"
CONFIG = "toolkit/{folder}/config.json"
CATALOGUE_USER_TABLES = ("favorites", "cart")
"""Read for every user at load time: the music and product substitutes pool them."""

_ETAPP_FIX = ("restore it from the ETAPP data (see SOURCE.md in the ETAPP folder) "
              "or point the ETAPP root at a complete copy")
_TRAVELPLANNER_FIX = ("copy TravelPlanner's MIT database table there (see SOURCE.md in the travelplanner folder) "
                      "or set dataset.travelplanner to the folder holding database/restaurants/")


def _csv_problem(path: Path, columns: tuple[str, ...], fix: str) -> str | None:
    if not path.is_file():
        return f"{path}: missing; {fix}"
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            header = tuple(next(csv.reader(handle)))
    except (OSError, UnicodeDecodeError, StopIteration, csv.Error) as exc:
        return f"{path}: unreadable ({exc!r}); {fix}"
    if header != columns:
        return f"{path}: header {list(header)} is not the expected {list(columns)}; {fix}"
    return None


def _read_json(path: Path, kind: type) -> Any:
    """The parsed file, or a DatasetError naming the file and the fix."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{path}: missing; {_ETAPP_FIX}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: not readable JSON ({exc}); {_ETAPP_FIX}") from None
    if not isinstance(value, kind):
        raise DatasetError(f"{path}: expected a JSON {kind.__name__}, got {type(value).__name__}; {_ETAPP_FIX}")
    return value


def _json_problem(path: Path, kind: type) -> str | None:
    try:
        _read_json(path, kind)
    except DatasetError as exc:
        return str(exc)
    return None


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DatasetError(f"{path}: not a readable CSV ({exc}); {_ETAPP_FIX}") from None


def user_stems(root: Path) -> list[str]:
    """The users, as file stems (`James Harrington` -> `James_Harrington`), in profiles.json order."""
    return [name.replace(" ", "_") for name in _read_json(root / PROFILES, dict)]


def user_problems(root: Path, user: str, tables: tuple[str, ...] | None = None) -> list[str]:
    """Every missing or unreadable file of one user (all of them, or only `tables`)."""
    kinds = tables or tuple(USER_TABLES)
    found = [_csv_problem(root / USER_TABLES[k].path.format(user=user), USER_TABLES[k].columns, _ETAPP_FIX)
             for k in kinds]
    if tables is None:
        found.append(_json_problem(root / CONCRETE_PROFILE.format(user=user), dict))
    return [p for p in found if p]


def shared_problems(root: Path, travelplanner: Path, products: Path = PRODUCTS_FILE) -> list[str]:
    """Every missing or unreadable shared file, and the catalogue inputs of every user."""
    found = [_json_problem(root / PROFILES, dict), _json_problem(root / WEATHER, dict),
             _json_problem(root / NEWS, list),
             _csv_problem(root / ACCOMMODATIONS.path, ACCOMMODATIONS.columns, _ETAPP_FIX),
             _csv_problem(root / ATTRACTIONS.path, ATTRACTIONS.columns, _ETAPP_FIX),
             _csv_problem(travelplanner / RESTAURANTS.path, RESTAURANTS.columns, _TRAVELPLANNER_FIX)]
    configs = [_json_problem(root / CONFIG.format(folder=app.folder), list) for app in APPS]
    found += configs if any(configs) else _config_problems(root)
    if not products.is_file():
        found.append(f"{products}: missing; it ships with toolsweep, restore it with git")
    if not found[0]:
        for user in user_stems(root):
            found += user_problems(root, user, CATALOGUE_USER_TABLES)
    return [p for p in found if p]


def _tool_configs(root: Path) -> dict[str, dict[str, Any]]:
    return {entry["function"]["name"]: entry for app in APPS
            for entry in _read_json(root / CONFIG.format(folder=app.folder), list)}


def _config_problems(root: Path) -> list[str]:
    try:
        names = tuple(_tool_configs(root))
    except (KeyError, TypeError) as exc:
        return [f"{root / 'toolkit'}: a config entry lacks function.name ({exc!r}); {_ETAPP_FIX}"]
    if names != TOOL_NAMES:
        return [f"{root / 'toolkit'}: the configs declare {list(names)}, not the 35 ETAPP tools "
                f"{list(TOOL_NAMES)} in app order; {_ETAPP_FIX}"]
    return []


@dataclass(eq=False)
class SandboxData:
    """Everything the sandbox reads, loaded once per run and shared by every Sandbox (read-only)."""

    root: Path
    travelplanner: Path
    users: tuple[str, ...]
    tool_configs: dict[str, dict[str, Any]] = field(repr=False)
    """Tool name -> its config entry, in registry order (sorted apps, then config order)."""
    tool_domains: dict[str, str | None] = field(repr=False)
    """Tool name -> the concrete-profile key of its preferences (None: no preferences)."""
    app_tools: dict[str, tuple[str, ...]] = field(repr=False)
    """App folder -> its tool names, in config order."""
    weather: dict[str, Any] = field(repr=False)
    news: list[dict[str, Any]] = field(repr=False)
    accommodations: pd.DataFrame = field(repr=False)
    attractions: pd.DataFrame = field(repr=False)
    restaurants: pd.DataFrame = field(repr=False)
    """The three navigation tables with upstream's NaN filter already applied."""
    flights: tuple[dict[str, Any], ...] = field(repr=False)
    music: tuple[Track, ...] = field(repr=False)
    products: tuple[dict[str, Any], ...] = field(repr=False)
    _tables: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)
    _checked: set[str] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def problems(cls, root: Path, travelplanner: Path, users: list[str], products: Path = PRODUCTS_FILE) -> list[str]:
        """Every missing or unreadable file a run for `users` needs; empty when all is well."""
        root, travelplanner = Path(root), Path(travelplanner)
        found = shared_problems(root, travelplanner, products)
        known = None if _json_problem(root / PROFILES, dict) else set(user_stems(root))
        for user in users:
            if known is not None and user not in known:
                found.append(f"user {user!r} is not in {root / PROFILES}; use a file stem such as "
                             f"'James_Harrington' (the name with '_' for spaces), one of {sorted(known)}")
            else:
                found += user_problems(root, user)
        return found

    @classmethod
    def load(cls, root: Path, travelplanner: Path, products: Path = PRODUCTS_FILE) -> "SandboxData":
        """The shared tables; a DatasetError lists every missing or bad file at once."""
        root, travelplanner = Path(root), Path(travelplanner)
        found = shared_problems(root, travelplanner, products)
        if found:
            raise DatasetError("the ETAPP sandbox cannot load:\n  " + "\n  ".join(found))
        users = tuple(user_stems(root))
        pooled = {k: [_read_csv(root / USER_TABLES[k].path.format(user=u)) for u in sorted(users)]
                  for k in CATALOGUE_USER_TABLES}
        app_tools = {app.folder: tuple(entry["function"]["name"] for entry in
                                       _read_json(root / CONFIG.format(folder=app.folder), list)) for app in APPS}
        domains = {name: app.domain for app in APPS for name in app_tools[app.folder]}
        return cls(root=root, travelplanner=travelplanner, users=users, tool_configs=_tool_configs(root),
                   tool_domains=domains, app_tools=app_tools, weather=_read_json(root / WEATHER, dict),
                   news=_read_json(root / NEWS, list),
                   accommodations=_read_csv(root / ACCOMMODATIONS.path).dropna(),
                   attractions=_read_csv(root / ATTRACTIONS.path).dropna(),
                   restaurants=_read_csv(travelplanner / RESTAURANTS.path).dropna(),
                   flights=generate_flights(), music=music_catalogue(pooled["favorites"]),
                   products=product_catalogue(pooled["cart"], products))

    def check_user(self, user: str) -> None:
        """Raise a DatasetError listing every file of `user` that is missing or unreadable."""
        if user in self._checked:
            return
        if user not in self.users:
            raise DatasetError(f"ETAPP user must be a file stem from {self.root / PROFILES} such as "
                               f"'James_Harrington', one of {list(self.users)}; got {user!r}")
        found = user_problems(self.root, user)
        if found:
            raise DatasetError(f"ETAPP files of user {user} are missing or bad:\n  " + "\n  ".join(found))
        self._checked.add(user)

    def table(self, user: str, kind: str) -> pd.DataFrame:
        """A user's table as pandas reads the CSV (cached: copy it before changing it)."""
        return self._cached((user, kind), lambda: _read_csv(self.root / USER_TABLES[kind].path.format(user=user)))

    def profile(self, user: str) -> dict[str, Any]:
        """The user's concrete (tool-use) profile, one dict per domain."""
        return self._cached((user, "profile"), lambda: _read_json(self.root / CONCRETE_PROFILE.format(user=user), dict))

    def _cached(self, key: tuple[str, str], read: Any) -> Any:
        with self._lock:
            if key not in self._tables:
                self._tables[key] = read()
            return self._tables[key]
