"""The benchmark registry: every module of this package that defines BENCHMARK.

Nothing here names a benchmark: a new one is a module in this folder (plus a YAML under
conf/dataset/), or any importable module given by its dotted path (`dataset.name=mypkg.mybench`).
Modules are imported on demand, so this package imports none of them at load time.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Iterable

import polars as pl

import yaml

from grading.registry import NotFound, find, names_in
from inference.errors import DatasetError

CONF = Path(__file__).resolve().parent.parent.parent / "conf"


def benchmark_names() -> list[str]:
    """The benchmarks shipped in this package (modules and subpackages not starting with _)."""
    return names_in(__name__, exclude=("base",))


@lru_cache(maxsize=64)
def get_benchmark(name: str):
    """The Benchmark called `name` (a module here, or a dotted module path defining BENCHMARK)."""
    try:
        return find(name, __name__, "BENCHMARK")
    except NotFound as exc:
        raise DatasetError(f"dataset.name must be one of {benchmark_names()} or the dotted path of a module "
                           f"defining BENCHMARK, got {name!r} ({exc})") from None


def default_benchmark(conf: Path = CONF) -> str:
    """The benchmark a bare `toolsweep` runs: the `name` of the dataset config that conf/config.yaml
    chooses by default (its `defaults` entry `dataset: ...`)."""
    root = yaml.safe_load((conf / "config.yaml").read_text(encoding="utf-8"))
    choice = next(e["dataset"] for e in root["defaults"] if isinstance(e, dict) and "dataset" in e)
    dataset = yaml.safe_load((conf / "dataset" / f"{choice}.yaml").read_text(encoding="utf-8"))
    return str((dataset.get("dataset") or dataset)["name"])


def load_dataset(name: str, path: str | Path, settings: Iterable[str], limit: int | None = None) -> pl.DataFrame:
    """The canonical sample table of benchmark `name` for `settings`, `limit` records each."""
    return get_benchmark(name).load(Path(path).expanduser(), tuple(settings), limit)
