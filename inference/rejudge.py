"""`toolsweep judge RUN_DIR [--out NEW_DIR | --overwrite] [override ...]`: run (again) the solvers of a
finished run's other roles (e.g. its judge) on the stored output of the evaluated model's, e.g.
with another judge, without any call to the evaluated model.

    toolsweep judge outputs/2026-11-30/10-00-00 roles.judge.model.path=/models/judge-70b
    toolsweep judge RUN_DIR engine@roles.judge.engine=openai roles.judge.engine.base_url=http://host:8000/v1

The run's own overrides (RUN_DIR/.hydra/overrides.yaml) and these are composed through Hydra, as
a run's are (group syntax included; an override of a key the run set replaces it); roles switched
off in the run are switched on. The result is a new run dir (NEW_DIR, by default RUN_DIR-judged,
-judged-2, ...) holding the run's agent output and the new judgements, so one agent run can carry
several judges side by side; `--overwrite` rewrites RUN_DIR itself. Generations are cached by
prompt and model, so re-judging with the same judge generates nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from grading.files import atomic_write_text
from grading.sweep import override_key
from inference.errors import ConfigError, ToolsweepError

OVERRIDES = Path(".hydra") / "overrides.yaml"


def merged_overrides(saved: list[str], new: list[str], groups: set[str] = frozenset()) -> list[str]:
    """The run's overrides with `new` after them; a new one replaces a saved one of the same key
    (Hydra refuses two values for one config group), and a new choice of a config group (`groups`:
    its names; `engine@roles.judge.engine`) drops the saved values inside it, which were the old
    option's (`roles.judge.engine.script` once the judge's engine is `openai`)."""
    replaced = {override_key(o) for o in new}
    packages = {key.split("@", 1)[1] if "@" in key else key for key in replaced
                if "@" in key or key in groups}
    return [o for o in saved if override_key(o) not in replaced
            and not any(override_key(o).startswith(f"{package}.") for package in packages)] + list(new)


def rejudged_config(run_dir: Path, overrides: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The run's config composed with `overrides` and every role switched on, and the overrides
    that compose it (for the new run's .hydra/overrides.yaml)."""
    import yaml

    from inference.run import CONFIG

    if not (run_dir / CONFIG).is_file():
        raise ConfigError(f"{run_dir} has no {CONFIG}: give the run dir of a run whose benchmark has solvers "
                          "besides the evaluated model's (a benchmark with a judge role)")
    bad = [o for o in overrides if "=" not in o and not o.startswith("~")]
    if bad:
        raise ConfigError(f"overrides must be key=value or group=option, got {bad}")
    if not (run_dir / OVERRIDES).is_file():
        return _merged_recorded(run_dir / CONFIG, overrides), overrides
    from inference.cli import CONF

    groups = {path.relative_to(CONF).as_posix() for path in CONF.rglob("*") if path.is_dir()}
    merged = merged_overrides(list(yaml.safe_load((run_dir / OVERRIDES).read_text(encoding="utf-8")) or []),
                              overrides, groups)
    return _enabled(_composed(merged)), merged


def _composed(overrides: list[str]) -> dict[str, Any]:
    """The config a `toolsweep` run with these overrides composes (Hydra, the run's own schema)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    import inference.cli as cli  # registers the config schema and the resolvers a run uses

    try:
        with initialize_config_dir(config_dir=str(cli.CONF), version_base="1.3"):
            return OmegaConf.to_container(compose(config_name="config", overrides=overrides), resolve=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"the run's overrides with these do not compose: {exc}") from None


def _merged_recorded(path: Path, overrides: list[str]) -> dict[str, Any]:
    """A run without Hydra's record (an older or copied one): its recorded config with key=value
    overrides merged in (group syntax needs the record)."""
    from omegaconf import OmegaConf

    groups = [o for o in overrides if "@" in override_key(o) or "/" in override_key(o)]
    if groups:
        raise ConfigError(f"{path.parent.parent} has no {OVERRIDES}, so group overrides {groups} cannot be composed; "
                          "give key=value overrides (e.g. roles.judge.engine.script=...)")
    merged = OmegaConf.merge(json.loads(path.read_text(encoding="utf-8")), OmegaConf.from_dotlist(overrides))
    return _enabled(OmegaConf.to_container(merged, resolve=True))


def _enabled(data: dict[str, Any]) -> dict[str, Any]:
    for role in (data.get("roles") or {}).values():
        role["enabled"] = True
    return data


def judged_dir(run_dir: Path) -> Path:
    """RUN_DIR-judged, or -judged-2, -judged-3, ...: the first that does not exist."""
    candidates = (run_dir.with_name(f"{run_dir.name}-judged{'' if k == 1 else f'-{k}'}") for k in range(1, 10_000))
    return next(path for path in candidates if not path.exists())


def first_other_solver(benchmark: Any) -> int:
    """The number of the first solver that does not generate with the evaluated model."""
    from inference.generation import MODEL_ROLE
    from inference.solvers import get_solver

    for number, name in enumerate(benchmark.solvers):
        if get_solver(name).role != MODEL_ROLE:
            return number
    raise ConfigError(f"benchmark {benchmark.name} has no solver besides the evaluated model's: nothing to judge")


def check_out(run_dir: Path, out: Path) -> None:
    """Refuse an `--out` that exists, the run dir itself included (however it is spelled)."""
    if out.exists():
        itself = f" (it is the run dir {run_dir} itself)" if out.resolve() == run_dir.resolve() else ""
        raise ConfigError(f"--out {out} exists{itself}; name a new dir, or rewrite the run with --overwrite")


def rejudge(run_dir: Path, overrides: list[str], out: Path | None = None) -> dict[str, Any]:
    """Judge `run_dir`'s stored agent output again into `out` (a new run dir: a copy of the run's
    files, then the judge's solvers), or into `run_dir` itself where `out` is None (--overwrite)."""
    import yaml

    from inference.config import validate
    from inference.run import evaluate, prepare_models, read_step, run_config
    from inference.runinfo import LOCK_NAME, run_dir_lock

    if out is not None:
        check_out(run_dir, out)
    data, composed_by = rejudged_config(run_dir, overrides)
    cfg, benchmark = run_config(data)
    start = first_other_solver(benchmark)
    read_step(run_dir, start - 1)  # a missing step table fails here, before a model loads
    prepare_models(cfg, benchmark)
    validate(cfg, benchmark)
    target = out or run_dir
    if out is not None:
        check_out(run_dir, out)  # again: it may have been made while the config was checked
        with run_dir_lock(run_dir):  # a run still being written is refused, not copied half-way
            shutil.copytree(run_dir, target, ignore=shutil.ignore_patterns(LOCK_NAME))
    with run_dir_lock(target):  # nothing of a run another process holds is rewritten
        (target / OVERRIDES).parent.mkdir(exist_ok=True)
        atomic_write_text(target / OVERRIDES, yaml.safe_dump(composed_by, default_flow_style=False))
        # evaluate records the updated config (steps/config.json) before the solvers' processes read it
        return evaluate(cfg, benchmark, target, data, start=start)


def build_parser(prog: str = "toolsweep-judge") -> argparse.ArgumentParser:
    """The parser of `toolsweep judge`."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("run_dir", type=Path, help="a finished run's dir")
    parser.add_argument("overrides", nargs="*", help="key=value or group=option, applied after the run's own")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="the new run dir (default: RUN_DIR-judged, -judged-2, ...)")
    where.add_argument("--overwrite", action="store_true", help="rewrite RUN_DIR itself")
    return parser


def main(argv: list[str] | None = None, prog: str = "toolsweep-judge") -> None:
    from inference import console

    args = build_parser(prog).parse_intermixed_args(argv)  # options before, between or after the overrides
    console.setup(verbose=False, quiet=False)
    out = None if args.overwrite else (args.out or judged_dir(args.run_dir))
    try:
        rejudge(args.run_dir, list(args.overrides), out)
    except ToolsweepError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"judged into {out or args.run_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
