"""The benchmark registry: every module of this package that defines BENCHMARK.

Nothing here names a benchmark: a new one is a module in this folder (plus a YAML under
conf/dataset/), or any importable module given by its dotted path (`dataset.name=mypkg.mybench`).
Modules are imported on demand, so this package imports none of them at load time.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import polars as pl

from inference.errors import DatasetError


def benchmark_names() -> list[str]:
    """The benchmarks shipped in this package (modules and subpackages not starting with _)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")
                  and m.name != "base")


@lru_cache(maxsize=64)
def get_benchmark(name: str):
    """The Benchmark called `name` (a module here, or a dotted module path defining BENCHMARK)."""
    module_name = name if "." in name else f"{__name__}.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise DatasetError(f"dataset.name must be one of {benchmark_names()} or the dotted path of a "
                               f"module defining BENCHMARK, got {name!r}") from None
        raise
    benchmark = getattr(module, "BENCHMARK", None)
    if benchmark is None:
        raise DatasetError(f"dataset.name {name!r}: module {module_name} defines no BENCHMARK")
    return benchmark


def load_dataset(name: str, path: str | Path, settings: Iterable[str], limit: int | None = None) -> pl.DataFrame:
    """The canonical sample table of benchmark `name` for `settings`, `limit` records each."""
    return get_benchmark(name).load(Path(path).expanduser(), tuple(settings), limit)
