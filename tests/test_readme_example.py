"""The docs' worked example (docs/extending.md: a benchmark with its own 0-10 metric), extracted and
run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl

from tests.conftest import REPO

PAGE = "extending.md"
SECTION = "## Adding a benchmark"
# A fenced block whose first line names the file it is: ```python\n# mybench/scorer.py\n...```; a
# YAML block may open with Hydra's `# @package` line (Hydra reads it only at the top), kept in the file.
FILE_BLOCK = re.compile(r"```(?:python|jsonl|yaml)\n(?P<header># @package \w+\n)?# (?P<path>[\w/.]+)\n"
                        r"(?P<body>.*?)```", re.DOTALL)
BASH_BLOCK = re.compile(r"```bash\n(?P<body>.*?)```", re.DOTALL)


def doc_part(page: str, heading: str) -> str:
    """docs/`page` from `heading` to the next heading of its level or above."""
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    start = text.index(heading)
    ends = [text.find(f"\n{'#' * level} ", start + len(heading)) for level in range(2, heading.index(" ") + 1)]
    return text[start:min((e for e in ends if e != -1), default=len(text))]


def example_section() -> str:
    """The section's first worked example: up to its first subsection."""
    return doc_part(PAGE, SECTION).split("\n### ")[0]


def write_files(section: str, root: Path) -> dict[str, str]:
    """Every file block of `section` written under `root`; returns {path: text}."""
    files = {m["path"]: (m["header"] or "") + m["body"] for m in FILE_BLOCK.finditer(section)}
    for path, body in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(body, encoding="utf-8")
    return files


def run_bash(section: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The section's first ```bash block, run in `cwd` with this venv's commands on PATH."""
    commands = BASH_BLOCK.search(section)["body"]
    base = {**os.environ, **(env or {})}
    base["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{base['PATH']}"
    return subprocess.run(["bash", "-euc", commands], cwd=cwd, env=base, capture_output=True, text=True,
                          timeout=600)


def test_readme_worked_example_runs_and_shows_its_0_to_10_metric(tmp_path):
    section = example_section()
    files = write_files(section, tmp_path)
    assert set(files) == {"data/mybench/test.jsonl", "mybench/benchmark.py", "mybench/scorer.py",
                          "conf/dataset/mybench.yaml"}
    done = run_bash(section, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| all | json | 2 | 10.00 | 100.0% | 100.0% | 0 |" in done.stdout, done.stdout
    metrics = pl.read_parquet(tmp_path / "runs" / "mybench-gold" / "metrics.parquet")
    assert metrics.filter(setting="all")["points"].to_list() == [10.0]
    samples = pl.read_parquet(tmp_path / "runs" / "mybench-gold" / "samples.parquet")
    assert samples["scorer"].unique().to_list() == ["mybench.scorer"]
    assert {"json_points", "json_tool_ok"} <= set(samples.columns) and "official_tool_ok" not in samples.columns
