"""The README's worked example (a benchmark with its own 0-10 metric), extracted and run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl

from tests.conftest import REPO

SECTION = "## Adding a benchmark"
# A fenced block whose first line names the file it is: ```python\n# mybench/scorer.py\n...```
FILE_BLOCK = re.compile(r"```(?:python|jsonl)\n# (?P<path>[\w/.]+)\n(?P<body>.*?)```", re.DOTALL)
BASH_BLOCK = re.compile(r"```bash\n(?P<body>.*?)```", re.DOTALL)


def example_section() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    return text[start:text.index("\n## ", start + len(SECTION))]


def test_readme_worked_example_runs_and_shows_its_0_to_10_metric(tmp_path):
    section = example_section()
    files = {m["path"]: m["body"] for m in FILE_BLOCK.finditer(section)}
    assert set(files) == {"data/mybench/test.jsonl", "mybench/benchmark.py", "mybench/scorer.py"}
    for path, body in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(body, encoding="utf-8")
    commands = BASH_BLOCK.search(section)["body"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-euc", commands], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| all | json | 2 | 10.00 | 100.0% | 100.0% | 0 |" in done.stdout, done.stdout
    metrics = pl.read_parquet(tmp_path / "runs" / "mybench-gold" / "metrics.parquet")
    assert metrics.filter(setting="all")["points"].to_list() == [10.0]
    samples = pl.read_parquet(tmp_path / "runs" / "mybench-gold" / "samples.parquet")
    assert samples["scorer"].unique().to_list() == ["mybench.scorer"]
    assert {"json_points", "json_tool_ok"} <= set(samples.columns) and "official_tool_ok" not in samples.columns
