"""Shared code names no benchmark, setting or model role: it reads what benchmarks declare.

Every .py under grading/ and inference/, except the benchmarks' own modules
(inference/benchmarks/) and the scorers' (grading/scorers/), is checked for:
- a benchmark's name anywhere in its text, comments and docstrings included, case-insensitive:
  the registered benchmarks, their dataset configs' `name`, and the registered scorers;
- a setting a benchmark declares (`Benchmark.settings`), as a string literal;
- a model role a benchmark declares (`Benchmark.roles`), as a string literal or an attribute.
The names come from the registries, so a new benchmark is covered without editing this file.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

SHARED = ("grading", "inference")
OWN = ("inference/benchmarks", "grading/scorers")
"""Where a benchmark's own code lives: it may name itself."""
ALLOWED = {("inference/verbs.py", "role 'judge' as a string"):
           "the `toolsweep judge` command's name: a verb of the CLI, which reruns any benchmark's other roles"}
"""Findings (file, what, whatever the line) that name no benchmark's part, each with why."""
MIN_SETTING_CHARS = 3
"""Settings of one or two letters (`p`, `r`, `b`) are file modes and variable names too; a literal
that short says nothing about a benchmark, so only longer settings are looked for."""


@dataclass(frozen=True)
class Names:
    """What shared code must not name."""

    benchmarks: frozenset[str]
    settings: frozenset[str]
    roles: frozenset[str]
    setting_groups: tuple[frozenset[str], ...] = ()
    """Each benchmark's settings: a tuple, list or set literal of two or more of one benchmark's
    settings names them, however short (`("p", "r", "c")`)."""


def declared_names() -> Names:
    """Every benchmark's, dataset config's and scorer's name, setting and role, from the registries."""
    from grading.scoring import scorer_names
    from inference.benchmarks import benchmark_names, get_benchmark

    benchmarks = [get_benchmark(n) for n in benchmark_names()]
    configs = [yaml.safe_load(p.read_text(encoding="utf-8")) or {} for p in (REPO / "conf" / "dataset").glob("*.yaml")]
    dataset_names = {str(c.get("name") or (c.get("dataset") or {}).get("name")) for c in configs} - {"None"}
    return Names(
        benchmarks=frozenset(n.lower() for n in (*benchmark_names(), *dataset_names, *scorer_names())),
        settings=frozenset(s for b in benchmarks for s in b.settings if len(s) >= MIN_SETTING_CHARS),
        roles=frozenset(r for b in benchmarks for r in b.roles),
        setting_groups=tuple(frozenset(b.settings) for b in benchmarks if len(b.settings) > 1))


def problems(text: str, names: Names) -> list[str]:
    """Every place in one Python source that names a benchmark, a setting or a role."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        lowered = line.lower()
        found += [f"line {number}: names benchmark {n!r}" for n in sorted(names.benchmarks) if n in lowered]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in names.settings:
                found.append(f"line {node.lineno}: setting {node.value!r} as a string")
            if node.value in names.roles:
                found.append(f"line {node.lineno}: role {node.value!r} as a string")
        elif isinstance(node, ast.Attribute) and node.attr in names.roles:
            found.append(f"line {node.lineno}: role {node.attr!r} as an attribute")
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and _settings_of_one(node, names):
            found.append(f"line {node.lineno}: a benchmark's settings as a collection")
    return found


def _settings_of_one(node: ast.Tuple | ast.List | ast.Set, names: Names) -> bool:
    values = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return (len(values) > 1 and len(values) == len(node.elts)
            and any(values <= group for group in names.setting_groups))


def shared_sources() -> list[Path]:
    """The .py files of shared code."""
    own = tuple(REPO / o for o in OWN)
    return sorted(p for top in SHARED for p in (REPO / top).rglob("*.py")
                  if not any(p.is_relative_to(o) for o in own))


@pytest.fixture(scope="module")
def names() -> Names:
    return declared_names()


def test_the_names_come_from_the_registries(names):
    # At least one benchmark with settings and one with a role, or the check below checks nothing.
    assert names.benchmarks and names.settings and names.roles


def test_shared_code_names_no_benchmark_setting_or_role(names):
    flagged = {path: found for p in shared_sources()
               if (found := [f for f in problems(p.read_text(encoding="utf-8"), names)
                             if ((path := str(p.relative_to(REPO))), f.split(": ", 1)[1]) not in ALLOWED])}
    assert not flagged, ("shared code names benchmarks; read what they declare instead (a solver's side tables, a "
                         "scorer's views), or move the code into the benchmark's module:\n"
                         + "\n".join(f"{path}: {'; '.join(found)}" for path, found in flagged.items()))


@pytest.mark.parametrize("kind", ["benchmark in a comment", "benchmark in a docstring", "setting", "role string",
                                  "role attribute", "settings tuple"])
def test_the_check_finds_a_planted_name(names, kind, tmp_path):
    benchmark, setting, role = sorted(names.benchmarks)[0], sorted(names.settings)[0], sorted(names.roles)[0]
    source = {"benchmark in a comment": f"x = 1  # as {benchmark.upper()} does\n",
              "benchmark in a docstring": f'def f():\n    """Read like {benchmark}."""\n',
              "setting": f"SETTING = {setting!r}\n",
              "role string": f"config = roles[{role!r}]\n",
              "role attribute": f"model = cfg.roles.{role}.model\n",
              "settings tuple": f"ORDER = {tuple(sorted(min(names.setting_groups, key=len)))!r}\n"}[kind]
    planted = tmp_path / "planted.py"
    planted.write_text(source, encoding="utf-8")
    assert problems(planted.read_text(encoding="utf-8"), names), source
    assert not problems("x = 1  # a benchmark's own names live in its module\n", names)


def test_the_walk_covers_shared_code_and_skips_the_benchmarks_own():
    paths = {str(p.relative_to(REPO)) for p in shared_sources()}
    assert "grading/leaderboard.py" in paths and "inference/merge.py" in paths
    assert not any(re.match(r"(inference/benchmarks|grading/scorers)/", p) for p in paths)
