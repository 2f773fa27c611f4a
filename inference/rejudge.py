"""`toolsweep judge RUN_DIR [key=value ...]`: run (again) the solvers of a finished run's other
roles (ETAPP: its judge) on the stored output of the evaluated model's, e.g. with another judge,
without any call to the evaluated model.

    toolsweep judge outputs/2026-11-30/10-00-00 roles.judge.model.path=/models/judge-70b

The overrides apply to the run's recorded config (RUN_DIR/steps/config.json), which is updated;
roles switched off in the run are switched on. Samples, metrics, reports and run.json are
rewritten by the run's own ending. Generations are cached by prompt and model, so re-judging
with the same judge generates nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from inference.errors import ConfigError, ToolsweepError


def rejudged_config(run_dir: Path, overrides: list[str]) -> dict[str, Any]:
    """The run's recorded config with `overrides` applied and every role switched on."""
    from omegaconf import OmegaConf

    from inference.run import CONFIG

    path = run_dir / CONFIG
    if not path.is_file():
        raise ConfigError(f"{run_dir} has no {CONFIG}: give the run dir of a run whose benchmark has solvers "
                          "besides the evaluated model's (e.g. a `toolsweep dataset=etapp ...` run)")
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"overrides must be key=value, got {bad}")
    merged = OmegaConf.merge(json.loads(path.read_text(encoding="utf-8")), OmegaConf.from_dotlist(overrides))
    data = OmegaConf.to_container(merged, resolve=True)
    for role in (data.get("roles") or {}).values():
        role["enabled"] = True
    return data


def first_other_solver(benchmark: Any) -> int:
    """The number of the first solver that does not generate with the evaluated model."""
    from inference.generation import MODEL_ROLE
    from inference.solvers import get_solver

    for number, name in enumerate(benchmark.solvers):
        if get_solver(name).role != MODEL_ROLE:
            return number
    raise ConfigError(f"benchmark {benchmark.name} has no solver besides the evaluated model's: nothing to judge")


def rejudge(run_dir: Path, overrides: list[str]) -> dict[str, Any]:
    from inference.config import validate
    from inference.run import evaluate, prepare_models, read_step, run_config

    data = rejudged_config(run_dir, overrides)
    cfg, benchmark = run_config(data)
    start = first_other_solver(benchmark)
    read_step(run_dir, start - 1)  # a missing step table fails here, before a model loads
    prepare_models(cfg, benchmark)
    validate(cfg, benchmark)
    # evaluate records the updated config (steps/config.json) before the solvers' processes read it
    return evaluate(cfg, benchmark, run_dir, data, start=start)


def main(argv: list[str] | None = None, prog: str = "toolsweep-judge") -> None:
    from inference import console

    args = argv if argv is not None else sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if args else 2)
    console.setup(verbose=False, quiet=False)
    try:
        rejudge(Path(args[0]), args[1:])
    except ToolsweepError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
