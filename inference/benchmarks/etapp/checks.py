"""Everything wrong with an ETAPP run's data and selection, found before any model loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inference.errors import DatasetError
from .cases import case_problems, load_cases, read_profiles
from .options import EtappOptions


def input_problems(options: EtappOptions) -> list[str]:
    """Every problem with the data files and the selection."""
    root = Path(options.path).expanduser()
    problems = [*case_problems(root, options.users, options.instructions), *sandbox_problems(options, root)]
    if options.upstream:
        problems += upstream_problems(options)
    return problems


def unused_options(cfg: Any) -> list[str]:
    """Root options ETAPP's agent does not read, or cannot honour together: set, they are an error."""
    found = []
    from inference.toolcalls import CALL_FORMATS

    parser = cfg.model.tool_parser
    if parser is not None and cfg.decoding.constraint != "none" and parser not in CALL_FORMATS:
        found.append(f"model.tool_parser={parser} with decoding.constraint={cfg.decoding.constraint}: toolsweep has "
                     f"no call grammar for that family (it has {sorted(CALL_FORMATS)}); decode freely "
                     "(decoding.constraint=none) or pick one of those")
    if cfg.prompt.format is not None:
        found.append(f"prompt.format={cfg.prompt.format}: ETAPP prompts in its own formats (dataset.methods); "
                     "leave prompt.format unset")
    return found


def sandbox_problems(options: EtappOptions, root: Path) -> list[str]:
    """Every missing or unreadable table of the selected users (all users when unreadable)."""
    from .agent_solver import travelplanner_path
    from .sandbox import SandboxData

    try:
        users = list(options.users or read_profiles(root))
    except DatasetError:
        return []  # the profiles file itself is already reported
    return SandboxData.problems(root, travelplanner_path(options), users)


def upstream_problems(options: EtappOptions) -> list[str]:
    from .upstream import read_upstream

    if len(options.settings) != 1 or len(options.methods) != 1:
        return [f"dataset.upstream: name the one setting and method that made the files (dataset.settings=[...] "
                f"dataset.methods=[...]), got {list(options.settings)} and {list(options.methods)}"]
    try:
        cases = load_cases(Path(options.path).expanduser(), options.users, options.instructions)
    except DatasetError:
        return []  # reported by case_problems
    return read_upstream(Path(options.upstream).expanduser(), sorted({c.user for c in cases}),
                         sorted({c.instruction for c in cases}))[1]
