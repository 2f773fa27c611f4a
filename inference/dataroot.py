"""One data root for every benchmark: `data_root=DIR` (or TOOLSWEEP_DATA_ROOT=DIR) and each
benchmark's YAML finds its files under it (`dataset.path: ${toolsweep_data:<its folder>}`), in the
layout of a shared data folder (one folder per benchmark, docs/sweeps.md lists them). A dataset's
own `dataset.path=...` still wins.

A sweep over several benchmarks (`+suite=personal`) is checked here before any job starts: a
benchmark folder missing under the root is said once, with the folder looked for and the option
to set, instead of one job failing minutes into the night.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence


ENV = "TOOLSWEEP_DATA_ROOT"
RESOLVER = "toolsweep_data"
_MARK = "${" + RESOLVER + ":"


def data_path(where: str, *, _root_: Any) -> str:
    """`${toolsweep_data:WHERE}`: WHERE under the config's data_root. Without a root, `???` (a
    required value, as `path: ???` was): a run and a sweep say which option to set first
    (root_problem), and what composes a config without running it still composes."""
    root = _root_.get("data_root")
    if root in (None, ""):
        return "???"
    return str(Path(str(root)).expanduser() / where)


def _no_root(where: str) -> str:
    return (f"dataset.path is not set and there is no data root to find {where}/ under: set dataset.path=..., "
            f"or data_root=DIR (or the environment variable {ENV}=DIR) where DIR holds {where}/")


def root_problem(composed: Any) -> str | None:
    """The error of a composed config whose dataset.path comes from the data root while none is set."""
    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(composed.dataset, resolve=False).get("path")
    if not (isinstance(raw, str) and raw.startswith(_MARK)) or composed.get("data_root") not in (None, ""):
        return None
    return _no_root(raw[len(_MARK):].rstrip("}"))


def from_root(dataset: Any) -> bool:
    """Whether a composed (unresolved) dataset node takes its path from the data root."""
    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(dataset, resolve=False).get("path")
    return isinstance(raw, str) and raw.startswith(_MARK)


def missing_data(jobs: Sequence[Sequence[str]], compose: Callable[[list[str]], Any]) -> list[str]:
    """Each problem of a sweep's jobs that take dataset.path from the data root: no root set, or a
    benchmark folder absent under it (one line per folder). `compose` gives a job's composed config."""
    problems: dict[str, None] = {}  # ordered, each said once
    seen: set[tuple[str, ...]] = set()
    for job in jobs:
        # jobs that choose the same data (checkpoints x benchmarks) are composed once per benchmark
        data = tuple(o for o in job if _chooses_data(o))
        if data in seen:
            continue
        seen.add(data)
        composed = compose(list(job))
        if not from_root(composed.dataset):
            continue
        if (unset := root_problem(composed)) is not None:
            problems[unset] = None
            continue
        path = Path(str(composed.dataset.path))
        if not path.exists():
            problems[_absent(path, Path(str(composed.data_root)).expanduser(), composed.dataset.name)] = None
    return list(problems)


def _chooses_data(override: str) -> bool:
    key = override.split("=", 1)[0].lstrip("+~")
    # an interpolated value may name the data too (dataset.path=${model.path}/data)
    return key in ("dataset", "data_root", "suite") or key.startswith("dataset.") or "${" in override


def _absent(path: Path, root: Path, benchmark: str) -> str:
    folder = root / path.relative_to(root).parts[0] if path.is_relative_to(root) else path
    looked = folder if not folder.exists() else path
    return (f"{benchmark}: {looked} does not exist; set data_root=DIR (or {ENV}) to a folder holding "
            f"{path.relative_to(root) if path.is_relative_to(root) else path.name}/, or dataset.path=... for this "
            "benchmark alone")
