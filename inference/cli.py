"""`toolsweep`: the Hydra entry point. Load -> prompt -> generate -> grade -> report.

The only module that touches Hydra and OmegaConf: it turns the composed config into typed
dataclasses once and hands those to the stages.
"""

from __future__ import annotations

import os

# Runs are offline by design: no hub look-ups, whatever the caller's environment says.
for _switch in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_switch] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from grading.grades import grade  # noqa: E402
from grading.metrics import summarize  # noqa: E402
from grading.report import format_table, write_markdown, write_metrics, write_samples  # noqa: E402
from inference import pipeline  # noqa: E402
from inference.config import ToolsweepConfig, register_configs, validate  # noqa: E402
from inference.errors import ToolsweepError  # noqa: E402
from inference.models import cache_root, folder_fingerprint, is_embedded_path, prepare_embedded_model  # noqa: E402
from inference.sweep import CHILD_FLAG, run_child_job  # noqa: E402
from inference.runinfo import Timer, git_commit, machine, package_versions, write_run_json  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
OmegaConf.register_new_resolver("toolsweep_root", lambda: str(REPO_ROOT), replace=True)
OmegaConf.register_new_resolver("toolsweep_cache", lambda: str(cache_root()), replace=True)
register_configs()


def evaluate(cfg: ToolsweepConfig, run_dir: Path, resolved: dict[str, Any]) -> dict[str, Any]:
    """Run one evaluation into `run_dir`; returns the run facts written to run.json."""
    timer = Timer()
    run_dir = pipeline.ensure_run_dir(run_dir)
    replay = cfg.engine.name == "replay"
    if cfg.model.embedded and not replay and is_embedded_path(cfg.model.path):
        with timer.phase("prepare_model"):
            prepare_embedded_model()
    validate(cfg)
    with timer.phase("load"):
        samples = pipeline.load_samples(cfg)
    with timer.phase("prompts"):
        tokenizer = None if replay else pipeline.load_tokenizer(cfg.model.path)
        max_len = None if replay else pipeline.context_length(cfg)
        prompts = pipeline.build_prompts(cfg, samples, tokenizer, max_len)
    with timer.phase("model_load"):
        engine = pipeline.make_engine(cfg, max_len, prompts.get_column("sample_id").to_list())
    requests = pipeline.requests_for(prompts, cfg.decoding.constraint)
    with timer.phase("generate"):
        generations = engine.generate(requests)
    with timer.phase("grade"):
        graded = grade(pipeline.collect(prompts, generations))
        metrics = summarize(graded)
    facts = _facts(cfg, resolved, engine.backend, graded, timer)
    meta = {"toolsweep_run": {k: facts[k] for k in ("model", "backend", "commit", "packages", "config")}}
    write_samples(graded, run_dir, meta)
    write_metrics(metrics, run_dir, meta)
    write_markdown(metrics, run_dir)
    facts["wall_s"]["total"] = timer.total()
    write_run_json(run_dir, facts)
    print(format_table(metrics))
    print(f"\nrun dir: {run_dir}  ({facts['wall_s']['total']:.1f}s, "
          f"{facts['throughput']['prompts_per_s']} prompts/s, "
          f"{facts['throughput']['output_tokens_per_s']} output tokens/s)")
    return facts


def _facts(cfg: ToolsweepConfig, resolved: dict[str, Any], backend: str, graded: Any,
           timer: Timer) -> dict[str, Any]:
    gen_s = timer.phases.get("generate", 0.0) or 1e-9
    generated = graded.filter(graded["output_tokens"].is_not_null())
    prompt_tokens = int(generated["prompt_tokens"].fill_null(0).sum())
    output_tokens = int(generated["output_tokens"].sum())
    model_path = Path(cfg.model.path)
    return {
        "status": "complete",
        "config": resolved,
        "model": {"path": str(model_path), "name": cfg.model.name or model_path.name,
                  "fingerprint": folder_fingerprint(model_path) if (model_path / "config.json").is_file() else None},
        "engine": cfg.engine.name,
        "constraint": cfg.decoding.constraint,
        "backend": backend,
        "decoding": {"greedy": cfg.decoding.temperature == 0, "temperature": cfg.decoding.temperature,
                     "max_new_tokens": cfg.decoding.max_new_tokens},
        "samples": {"total": graded.height, "generated": generated.height,
                    "failed": int(graded["failure"].is_not_null().sum()),
                    "failures": {k: v for k, v in graded["failure"].drop_nulls().value_counts()
                                 .iter_rows()}},
        "wall_s": dict(timer.phases),
        "throughput": {"prompts_per_s": round(generated.height / gen_s, 3),
                       "prompt_tokens_per_s": round(prompt_tokens / gen_s, 1),
                       "output_tokens_per_s": round(output_tokens / gen_s, 1),
                       "prompt_tokens": prompt_tokens, "output_tokens": output_tokens},
        "packages": package_versions(),
        "commit": git_commit(REPO_ROOT),
        "machine": machine(),
    }


@hydra.main(version_base="1.3", config_path=str(REPO_ROOT / "conf"), config_name="config")
def main(cfg: DictConfig) -> None:
    """Compose the config, convert it once, evaluate; user errors exit 2 with one message."""
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    if hydra_cfg.mode == RunMode.MULTIRUN and not os.environ.get(CHILD_FLAG):
        # Each sweep job runs in its own process: GPU memory is released, crashes stay local.
        run_child_job(list(hydra_cfg.overrides.task), run_dir, hydra_cfg.job.num,
                      gpus_per_job=int(cfg.model.tensor_parallel_size))
        return
    try:
        typed: ToolsweepConfig = OmegaConf.to_object(cfg)
        evaluate(typed, run_dir, OmegaConf.to_container(cfg, resolve=True))
    except ToolsweepError as exc:
        print(f"toolsweep: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
