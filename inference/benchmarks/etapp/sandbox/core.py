"""What every ETAPP app shares: the case clock, the environment an app reads, observations and
their serialisation (spec section 0)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from inference.errors import DatasetError

if TYPE_CHECKING:
    from inference.benchmarks.etapp.sandbox.data import SandboxData

OBSERVATION_CAP = 8192
"""Characters of a serialised result the agent sees (upstream's cut)."""
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
DATE_FORMAT = "%Y-%m-%d"


@dataclass(frozen=True)
class Observation:
    text: str
    """Exactly the string the agent sees (after serialisation and the cap)."""
    error: bool
    """The call failed: unknown tool, an exception's message, or a failure/error status."""


@dataclass(frozen=True)
class Clock:
    """The case's "now", as upstream's two values: CURRENT_DATE (the text before the space,
    used for substring matches) and CURRENT_TIME (the whole string, parsed for comparisons)."""

    date: str
    time: str
    moment: datetime

    @classmethod
    def parse(cls, now: str) -> "Clock":
        """The clock for a case timestamp; strptime accepts an unpadded hour ("2024-09-08 7:45:00")."""
        try:
            moment = datetime.strptime(now, TIME_FORMAT)
        except (TypeError, ValueError):
            raise DatasetError(f"ETAPP case timestamp must look like '2024-09-06 07:15:00' "
                               f"({TIME_FORMAT}), got {now!r}; fix the instruction's timestamp") from None
        return cls(date=now.split(" ")[0], time=now, moment=moment)


@dataclass
class Env:
    """What an app instance reads. Mutable on purpose: `Sandbox.advance` swaps the clock while the
    apps keep their tables (upstream's sequential mode)."""

    data: "SandboxData"
    user: str
    clock: Clock


@dataclass(frozen=True)
class Failed:
    """A result upstream reports with status success although the call failed (the thermostat's
    bad date): shown unchanged, flagged as an error."""

    value: Any


def new_id(clock: Clock, issued: int) -> str:
    """Upstream appends a random 5-digit number to CURRENT_DATE; a counter keeps it deterministic
    (and, as upstream, a string while the CSV ids are ints)."""
    return clock.date + str(10000 + issued)


def cap(text: str, *, e_react: bool = False) -> str:
    """The first 8192 characters; E-ReAct keeps characters 1..8191 of a longer text (upstream's
    off-by-one slice)."""
    if len(text) <= OBSERVATION_CAP:
        return text
    return text[1:OBSERVATION_CAP] if e_react else text[:OBSERVATION_CAP]


def serialise(result: Any) -> str:
    """Upstream's json.dumps: non-ASCII kept (°), float NaN written as the bare NaN token."""
    return json.dumps(result, ensure_ascii=False)


def failed_status(result: Any) -> bool:
    """A returned (not raised) failure: upstream's {"status": "failure" | "error", ...}."""
    return isinstance(result, dict) and result.get("status") in ("failure", "error")


def contains(column: Any, text: str, *, case: bool = True) -> Any:
    """Upstream's `Series.str.contains` (regex on) with the text escaped: a literal substring match,
    so "(" or "+" cannot raise a regex error (the documented deviation), while a non-string cell
    still gives NaN, which breaks a later mask as it does upstream."""
    return column.str.contains(re.escape(text), case=case, regex=True)


def records(frame: Any) -> list[dict[str, Any]]:
    """A pandas frame as upstream returns it: a list of row dicts in column order."""
    return frame.to_dict(orient="records")
