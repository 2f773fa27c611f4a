"""`toolsweep-judge RUN_DIR [key=value ...]`: judge (again) a finished ETAPP run, e.g. with
another judge model, without any agent call.

    toolsweep-judge outputs/2026-11-30/10-00-00 judge.model.path=/models/judge-70b

The overrides apply to the run's recorded config (RUN_DIR/etapp/config.json), which is updated;
the judge runs in its own process; samples, metrics and run.json are rewritten. Judgements are
cached by prompt and judge model, so re-judging with the same judge generates nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from inference.errors import ToolsweepError


def rejudge(run_dir: Path, overrides: list[str]) -> dict:
    from omegaconf import OmegaConf

    from inference.config import typed_config
    from inference.runinfo import Timer, run_dir_lock, write_run_json, write_state

    from .judge import read_trajectories
    from .phases import CONFIG
    from .run import DatasetError, finish, judge_model_problems, run_phase

    config_path = run_dir / CONFIG
    if not config_path.is_file():
        raise DatasetError(f"{run_dir} is not an ETAPP run dir (no {CONFIG}); give the folder a "
                           "`toolsweep dataset=etapp ...` run wrote")
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise DatasetError(f"overrides must be key=value, got {bad}")
    data = OmegaConf.to_container(OmegaConf.merge(json.loads(config_path.read_text(encoding="utf-8")),
                                                  OmegaConf.from_dotlist(overrides)), resolve=True)
    cfg = typed_config(data)
    cfg.judge.enabled = True
    data["judge"]["enabled"] = True
    read_trajectories(run_dir)  # a missing or damaged file fails here, before the judge loads
    problems = judge_model_problems(cfg)
    if problems:
        raise DatasetError("; ".join(problems))
    timer = Timer()
    with run_dir_lock(run_dir):
        write_state(run_dir, "running")
        config_path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
        with timer.phase("judge"):
            run_phase("judge", run_dir)
        facts = finish(cfg, run_dir, data, timer)
        write_state(run_dir, "complete")
        write_run_json(run_dir, facts)
    return facts


def main(argv: list[str] | None = None) -> None:
    from inference import console

    args = argv if argv is not None else sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if args else 2)
    console.setup(verbose=False, quiet=False)
    try:
        rejudge(Path(args[0]), args[1:])
    except ToolsweepError as exc:
        print(f"toolsweep-judge: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
