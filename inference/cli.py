"""`toolsweep`: the Hydra entry point. Compose the config, type it, validate it, run it.

The only module that touches Hydra and OmegaConf: it turns the composed config into typed
dataclasses once (the dataset by its benchmark's options, every engine by its own) and hands
those to the run (inference/run.py: load -> solvers over model roles -> grade -> reports).
"""

from __future__ import annotations

import os

# Runs are offline by design: no hub look-ups, whatever the caller's environment says.
for _switch in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_switch] = "1"

from inference import console  # noqa: E402  (before anything imports vLLM: it routes vLLM's logs)
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from inference.config import register_configs, validate  # noqa: E402
from inference.dataroot import RESOLVER as DATA_RESOLVER, data_path, root_problem  # noqa: E402
from inference.errors import ConfigError, ToolsweepError  # noqa: E402
from inference.models import cache_root  # noqa: E402
from inference.run import evaluate, prepare_models, run_config  # noqa: E402
from inference.runinfo import run_dir_lock  # noqa: E402
from inference.slurm import register as register_slurm_resolvers  # noqa: E402
from inference.sweep import CHILD_FLAG, fork_job, gpu_slots, run_child_job  # noqa: E402
from inference.verbs import CONF, RUN, dispatch, verb_lines, verb_named  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
OmegaConf.register_new_resolver("toolsweep_root", lambda: str(REPO_ROOT), replace=True)
OmegaConf.register_new_resolver("toolsweep_cache", lambda: str(cache_root()), replace=True)
OmegaConf.register_new_resolver("toolsweep_gpu_slots", gpu_slots, replace=True)
OmegaConf.register_new_resolver(DATA_RESOLVER, data_path, replace=True)
register_configs()
register_slurm_resolvers()
HELP = """toolsweep: batch evaluation of (personalized) tool-calling LLMs on local models.

  toolsweep [run] [group=option ...] [key=value ...]   one run into outputs/DATE/TIME
  toolsweep [run] -m model.path=A,B ...                a sweep: one job per combination, then a leaderboard
  toolsweep VERB --help                                each verb's own options

Verbs:
{verbs}

Groups (conf/<group>/<option>.yaml):
{groups}

Common keys: model.path=/local/model  dataset.path=/data  dataset.limit=N  dataset.settings=[...]
  decoding.constraint=outlines|xgrammar|guidance|none  engine.shard_size=N  max_error_rate=0.1
A benchmark's own options are dataset.* (see its conf/dataset YAML); the models it uses besides
the evaluated one are roles.<name>.* (a judge: roles.<name>.model.path=..., engine@roles.<name>.engine=openai).

The commands of earlier releases (toolsweep grade, toolsweep compare, ...) still run their verb.
Hydra's own options: toolsweep --hydra-help. The full composed config: toolsweep --cfg job.
"""


def help_text() -> str:
    """The groups a user chooses from, from the YAML files under conf/ (nothing internal)."""
    lines = []
    for group in sorted(p for p in CONF.iterdir() if p.is_dir()):
        for sub in sorted([group, *[p for p in group.iterdir() if p.is_dir()]]):
            options = sorted(f.stem for f in sub.glob("*.yaml"))
            if options:
                lines.append(f"  {sub.relative_to(CONF).as_posix()}: {', '.join(options)}")
    return HELP.format(groups="\n".join(lines), verbs=verb_lines())


def run(resolved: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Type, check and run one composed config."""
    cfg, benchmark = run_config(resolved)
    prepare_models(cfg, benchmark)
    validate(cfg, benchmark)
    return evaluate(cfg, benchmark, run_dir, resolved)


def resolved_config(cfg: DictConfig) -> dict[str, Any]:
    """The composed config resolved; a dataset.path from the data root while none is set is a
    ConfigError with the fix (not OmegaConf's resolver error around it)."""
    if (problem := root_problem(cfg)) is not None:
        raise ConfigError(problem)
    return OmegaConf.to_container(cfg, resolve=True)


@hydra.main(version_base="1.3", config_path=str(CONF), config_name="config")
def hydra_main(cfg: DictConfig) -> None:
    """Compose the config, convert it once, evaluate; user errors exit 2 with one message."""
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    console.setup(verbose=bool(cfg.verbose), quiet=bool(cfg.quiet))
    if hydra_cfg.mode == RunMode.MULTIRUN and not os.environ.get(CHILD_FLAG):
        # Each sweep job runs in its own process: GPU memory is released, crashes stay local.
        run_child_job(list(hydra_cfg.overrides.task), run_dir, hydra_cfg.job.num,
                      gpus_per_job=int(cfg.model.tensor_parallel_size),
                      search_path=[o for o in hydra_cfg.overrides.hydra if o.startswith("hydra.searchpath=")],
                      fork=fork_job(cfg, hydra_cfg.launcher))
        return
    try:
        # held before the config is typed and checked (seconds for a large benchmark): a second run on a live
        # run's dir is refused at once
        with run_dir_lock(run_dir):
            run(resolved_config(cfg), run_dir)
    except ToolsweepError as exc:
        print(f"toolsweep: error: {exc}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    """`toolsweep`: a verb's entry point (inference/verbs.py), our --help (the verbs, the groups to
    choose from), else Hydra's app (a bare `toolsweep key=value ...`, or `toolsweep run ...`)."""
    argv = sys.argv[1:]
    verb = verb_named(argv[0]) if argv else None
    if verb is not None and verb.name != RUN:
        sys.exit(dispatch(verb, argv[1:]) or 0)
    if any(a in ("--help", "-h") for a in argv):
        print(help_text())
        return
    if verb is not None:
        del sys.argv[1]  # Hydra reads sys.argv: the verb `run` is not an override
    hydra_main()


if __name__ == "__main__":
    main()
