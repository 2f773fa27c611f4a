"""The gold-coverage table of docs/grading.md, read for the replay tests that recompute each figure."""

from __future__ import annotations

import re

from tests.conftest import REPO

GRADING = REPO / "docs" / "grading.md"
_ROW = re.compile(r"^\| `(?P<benchmark>[a-z_]+)` \| (?P<grammar>[^|]+) \| (?P<value>[0-9.]+) \| (?P<outside>\d+) of (?P<n>\d+) \|")


def documented_coverage() -> dict[str, tuple[float, int, int]]:
    """{benchmark: (gold_schema_coverage on the pooled row, gold answers outside, answers)}."""
    rows = {}
    for line in GRADING.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match:
            rows[match["benchmark"]] = (float(match["value"]), int(match["outside"]), int(match["n"]))
    return rows


def assert_documented(benchmark: str, metrics) -> None:
    """The pooled official row's coverage equals the figure docs/grading.md gives the benchmark."""
    row = metrics.filter(setting="all", parser="official").row(0, named=True)
    value, outside, n = documented_coverage()[benchmark]
    assert row["n"] == n and round(row["gold_schema_coverage"], 4) == value, (benchmark, row["gold_schema_coverage"])
    assert round(n * (1 - row["gold_schema_coverage"])) == outside
