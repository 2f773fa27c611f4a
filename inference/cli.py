"""`toolsweep`: the Hydra entry point. Load -> prompt -> solve -> read calls -> grade -> report.

The only module that touches Hydra and OmegaConf: it turns the composed config into typed
dataclasses once and hands those to the stages.
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

from grading.grades import grade  # noqa: E402
from grading.metrics import summarize  # noqa: E402
from grading.report import format_table, write_markdown, write_metrics, write_samples, write_slices  # noqa: E402
from grading.slices import slice_table  # noqa: E402
from grading.html_report import write_run_report  # noqa: E402
from grading.scoring import scorer_of  # noqa: E402
from inference import pipeline  # noqa: E402
from inference.config import ToolsweepConfig, register_configs, validate  # noqa: E402
from inference.errors import ToolsweepError  # noqa: E402
from inference.models import cache_root, is_embedded_path, prepare_embedded_model  # noqa: E402
from inference.benchmarks import get_benchmark  # noqa: E402
from inference.solvers import get_solver  # noqa: E402
from inference.sweep import CHILD_FLAG, run_child_job  # noqa: E402
from inference.cache import model_digest  # noqa: E402
from inference.runinfo import (Timer, git_commit, machine, package_versions, run_dir_lock,  # noqa: E402
                               write_run_json, write_state)

REPO_ROOT = Path(__file__).resolve().parent.parent
OmegaConf.register_new_resolver("toolsweep_root", lambda: str(REPO_ROOT), replace=True)
OmegaConf.register_new_resolver("toolsweep_cache", lambda: str(cache_root()), replace=True)
register_configs()


def evaluate(cfg: ToolsweepConfig, run_dir: Path, resolved: dict[str, Any]) -> dict[str, Any]:
    """Run one evaluation into `run_dir`; returns the run facts written to run.json.

    The run dir records its state (running, complete, failed); rerunning into the same dir
    resumes from the shards already written.
    """
    run_dir = pipeline.ensure_run_dir(run_dir)
    with run_dir_lock(run_dir):  # a second live run on this dir stops here (RunDirBusy, exit 2)
        write_state(run_dir, "running")
        try:
            facts = _evaluate(cfg, run_dir, resolved)
        except BaseException as exc:
            write_state(run_dir, "failed", f"{type(exc).__name__}: {exc}")
            raise
        write_state(run_dir, "complete")
        write_run_json(run_dir, facts)
        return facts


def _evaluate(cfg: ToolsweepConfig, run_dir: Path, resolved: dict[str, Any]) -> dict[str, Any]:
    timer = Timer()
    loads_model = cfg.engine.loads_model
    needs_tokenizer = loads_model or _prompt_format(cfg) == "native"
    if cfg.model.embedded and needs_tokenizer and is_embedded_path(cfg.model.path):
        with timer.phase("prepare_model"):
            prepare_embedded_model()
    validate(cfg)
    benchmark = get_benchmark(cfg.dataset.name)
    if benchmark.runner:  # a benchmark with its own stages (a multi-turn agent and a judge)
        import importlib

        return importlib.import_module(benchmark.runner).run(cfg, run_dir, resolved, timer)
    dtype = pipeline.resolve_dtype(cfg) if loads_model else None
    with timer.phase("load"):
        samples = pipeline.load_samples(cfg)
    with timer.phase("prompts"):
        pipeline.marker("building prompts")
        tokenizer = pipeline.load_tokenizer(cfg.model.path) if needs_tokenizer else None
        plan = pipeline.plan_prompts(cfg, tokenizer)
        max_len = pipeline.context_length(cfg) if loads_model else None
        prompts = pipeline.build_prompts(cfg, samples, tokenizer, max_len, plan, render=loads_model)
    conversations = pipeline.conversations_for(prompts, cfg.decoding.constraint, plan)
    solver = get_solver(get_benchmark(cfg.dataset.name).solver)
    with timer.phase("generate"):
        generate, gen_stats = _generator(cfg, run_dir, max_len, prompts, timer)
        solved = solver.solve(conversations, generate)
    with timer.phase("grade"):
        generations = [g for c in solved for g in c.generations]
        table = pipeline.read_calls(pipeline.collect(prompts, generations), plan, tokenizer)
        graded = grade(table, progress=console.progress)
        metrics = summarize(graded)
    facts = {**_facts(cfg, resolved, gen_stats, graded, timer, plan), "dtype": dtype}
    _write_reports(graded, metrics, run_dir, facts)
    pipeline.check_error_rate(graded, cfg.max_error_rate)
    return facts


def _prompt_format(cfg: ToolsweepConfig) -> str | None:
    # Before validation: an unknown dataset.name is reported there, with every other problem.
    try:
        return cfg.prompt.format or get_benchmark(cfg.dataset.name).prompt_format
    except ToolsweepError:
        return None


def _generator(cfg: ToolsweepConfig, run_dir: Path, max_len: int | None, prompts: Any,
               timer: Timer) -> tuple[Any, dict[str, Any]]:
    """The solver's `generate`: the engine behind the run's store (resume) and cache; its stats
    fill in as it runs."""
    sample_ids = prompts.get_column("sample_id").to_list()
    if not cfg.engine.loads_model:
        engine = pipeline.make_engine(cfg, max_len, sample_ids)
        if engine.missing:
            shown = ", ".join(engine.missing[:20]) + (" ..." if len(engine.missing) > 20 else "")
            pipeline.marker(f"replay: {len(engine.missing)} samples have no prediction and count as wrong "
                            f"(failure 'missing'): {shown}")
        return engine.generate, {"engine_calls": 0, "stored_hits": 0, "shards": 0, "backend": engine.backend}
    return pipeline.store_generator(cfg, run_dir, max_len, sample_ids, timer)


def _write_reports(graded: Any, metrics: Any, run_dir: Path, facts: dict[str, Any]) -> None:
    pipeline.marker("writing reports")
    meta = {"toolsweep_run": {k: facts[k] for k in ("model", "backend", "prompt", "commit", "packages", "config")}}
    scorer = scorer_of(graded)
    write_samples(graded, run_dir, meta)
    pipeline.marker("wrote samples.parquet", shown=False)
    write_metrics(metrics, scorer, run_dir, meta)
    slices = slice_table(graded)
    write_slices(slices, scorer, run_dir, meta)
    write_markdown(metrics, scorer, run_dir, slices)
    write_run_report(run_dir, facts)
    prompt = facts["prompt"]
    print(f"scorer: {scorer.name}; prompt format: {prompt['format']}"
          + (f" (tool parser {prompt['tool_parser']}; tools given in {prompt['tools_in']})" if "tool_parser" in prompt
             else ""))
    print(format_table(metrics, scorer))
    throughput = facts["throughput"]
    print(f"\nrun dir: {run_dir}  ({facts['wall_s']['total']:.1f}s"
          + (f", {throughput['prompts_per_s']} prompts/s, {throughput['output_tokens_per_s']} output tokens/s"
             if facts["generation"]["engine_calls"] else ", nothing generated") + ")")


def _facts(cfg: ToolsweepConfig, resolved: dict[str, Any], gen_stats: dict[str, Any], graded: Any,
           timer: Timer, plan: Any) -> dict[str, Any]:
    gen_s = max(timer.phases.get("generate", 0.0) - timer.phases.get("model_load", 0.0), 1e-9)
    generated = graded.filter(graded["output_tokens"].is_not_null())
    prompt_tokens = int(generated["prompt_tokens"].fill_null(0).sum())
    output_tokens = int(generated["output_tokens"].sum())
    model_path = Path(cfg.model.path)
    return {
        "status": "complete",
        "config": resolved,
        "model": {"path": str(model_path), "name": cfg.model.name or model_path.name,
                  "fingerprint": model_digest(model_path, cache_root() / "digests")[:16]
                  if (model_path / "config.json").is_file() else None},
        "engine": cfg.engine.name,
        "constraint": cfg.decoding.constraint,
        "prompt": plan.facts(),
        "scorer": scorer_of(graded).name,
        "backend": gen_stats["backend"],
        "generation": {k: gen_stats[k] for k in ("engine_calls", "stored_hits", "shards")},
        "decoding": {"greedy": cfg.decoding.temperature == 0, "temperature": cfg.decoding.temperature,
                     "max_new_tokens": cfg.decoding.max_new_tokens},
        "samples": {"total": graded.height, "generated": generated.height,
                    "failed": int(graded["failure"].is_not_null().sum()),
                    "failures": dict(sorted(graded["failure"].drop_nulls().value_counts().iter_rows())),
                    "errors": pipeline.error_summary(graded)},
        "wall_s": {**timer.phases, "total": timer.total()},
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
    console.setup(verbose=bool(cfg.verbose), quiet=bool(cfg.quiet))
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
