"""BFCL with the real vLLM CPU engine and the tiny seeded model (what is checked is the pipeline and the
grammar, not the answers): the first case of every AST category and of every multi-turn category,
under the call grammar (xgrammar) and free, in one engine start.

The run's pieces are the CLI's own (config composition, the benchmark's loader and texts, prompt
rendering, requests, the generator and its engine, grading); a child process drives them so
that one engine serves both decodings (the CLI starts one per run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import REPO, tiny_args

pytestmark = [pytest.mark.vllm, pytest.mark.shared_data]
MAX_NEW_TOKENS = 48


def drive(out: str, data: str, bfcl_eval: str, model: str) -> None:
    """Generate constrained then free answers with one engine; write each graded table."""
    import inference.cli  # noqa: F401  (registers the config schema, as the entry point does)
    from grading.grades import grade
    from inference.benchmarks.bfcl.solver import with_texts
    from inference.benchmarks.bfcl.texts import OWN
    from inference.generation import Generator, Role
    from inference.run import load_samples
    from inference.runinfo import Timer
    from inference.solvers.single_call import build_prompts, collect, plan_prompts, requests_for
    from tests.inference.test_config import _typed

    _refuse_inspection_subprocess()
    cfg, benchmark = _typed(["dataset=bfcl", f"dataset.path={data}", "dataset.limit=1", "decoding.constraint=xgrammar",
                             *tiny_args(model, max_new_tokens=MAX_NEW_TOKENS), "engine.cache=false"])
    samples = with_texts(load_samples(cfg, benchmark), OWN)
    generator = Generator(Role.of(cfg), Path(out), Timer())
    plan = plan_prompts(cfg, benchmark, generator.tokenizer)
    prompts = build_prompts(cfg, samples, generator.tokenizer, generator.max_model_len, plan)
    for constraint in ("xgrammar", "none"):
        table = collect(prompts, generator.generate(requests_for(prompts, constraint, plan)))
        table = table.with_columns(pl.lit(None, dtype=pl.String).alias("calls"),
                                   pl.lit(None, dtype=pl.String).alias("call_reader"))
        grade(table).drop("prompt_token_ids", strict=False).write_parquet(Path(out) / f"{constraint}.parquet")
    drive_multi_turn(out, data, bfcl_eval, model, generator)
    (Path(out) / "engine.json").write_text(json.dumps(generator.stats), encoding="utf-8")


def _refuse_inspection_subprocess() -> None:
    """vLLM inspects a model class once per cache folder (VLLM_CACHE_ROOT, new here) in a new
    interpreter; toolsweep's CPU engine has it done in its own process (8-9 s less)."""
    from vllm.model_executor.models import registry

    real_run = registry.subprocess.run

    def run(command, *args, **kwargs):
        assert command != registry._SUBPROCESS_COMMAND, "vLLM's registry inspected the model in a subprocess"
        return real_run(command, *args, **kwargs)

    registry.subprocess.run = run


def drive_multi_turn(out: str, data: str, bfcl_eval: str, model: str, generator) -> None:
    """BFCL's loop over the first case of each multi-turn category, on the same engine."""
    from grading.grades import grade
    from grading.scorers.bfcl.environments import load
    from inference.benchmarks.bfcl import multi_turn as loop_module
    from inference.benchmarks.bfcl.solver import with_texts
    from inference.benchmarks.bfcl.texts import resolve
    from inference.run import load_samples
    from tests.inference.test_config import _typed

    cfg, benchmark = _typed(["dataset=bfcl", f"dataset.path={data}", "dataset.limit=1", f"dataset.bfcl_eval={bfcl_eval}",
                             f"dataset.settings=[{','.join(loop_module.MULTI_TURN)}]",
                             *tiny_args(model, max_new_tokens=MAX_NEW_TOKENS), "engine.cache=false"])
    texts = resolve("upstream", bfcl_eval, data)
    samples = with_texts(load_samples(cfg, benchmark), texts)
    classes = load(bfcl_eval).classes
    for constraint in ("xgrammar", "none"):
        loop = loop_module.Loop(False, texts, constraint != "none", MAX_NEW_TOKENS, generator.max_model_len)
        episodes = [loop_module.start(c, classes, loop) for c in loop_module.cases_of(samples)]
        loop_module.run(episodes, generator.generate, generator.render, loop)
        ran = loop_module.episode_table(episodes).drop("sample_index")
        table = samples.drop([c for c in ran.columns if c != "sample_id" and c in samples.columns]).join(ran, on="sample_id")
        table = table.with_columns(pl.lit(bfcl_eval).alias("bfcl_code"), pl.lit(None, dtype=pl.String).alias("calls"))
        grade(table).drop("prompt_token_ids", strict=False).write_parquet(Path(out) / f"multi_{constraint}.parquet")


def test_every_category_gives_graded_rows_constrained_and_free(tmp_path, bfcl_data, bfcl_eval_copy, tiny_model,
                                                               scratch_env):
    code = (f"from tests.inference.test_bfcl_vllm import drive; "
            f"drive({str(tmp_path)!r}, {str(bfcl_data)!r}, {bfcl_eval_copy!r}, {str(tiny_model)!r})")
    # a cache folder of its own: the engine inspects the model's class anew, in its own process
    env = {**scratch_env, "VLLM_CACHE_ROOT": str(tmp_path / "vllm")}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "vllm" / "modelinfos" / "vllm-model_executor-models-llama-LlamaForCausalLM.json").is_file()
    assert done.stderr.count("loading model") == 1, done.stderr[-2000:]  # one engine for both decodings
    constrained, free = (pl.read_parquet(tmp_path / f"{c}.parquet") for c in ("xgrammar", "none"))
    for table in (constrained, free):
        assert table["setting"].to_list() == ["simple_python", "multiple", "parallel", "parallel_multiple",
                                              "irrelevance", "live_simple", "live_multiple", "live_parallel",
                                              "live_parallel_multiple", "live_irrelevance", "live_relevance"]
        assert table["official_correct"].null_count() == 0 and table["official_category"].null_count() == 0
        assert table["failure"].drop_nulls().is_in(["length", "too_long"]).all(), table.select("sample_id", "failure")
    finished = constrained.filter(pl.col("finish_reason") == "stop")
    assert finished.height >= 1
    for output, functions, valid, calls in finished.select("output", "functions", "official_valid",
                                                           "official_calls").rows():
        # the grammar's answers are BFCL call lists of the case's own functions, or []
        assert output.startswith("[") and output.endswith("]") and valid, output
        names = {f["name"] for f in json.loads(functions)}
        assert all(next(iter(call)) in names for call in json.loads(calls)), (output, names)
    assert free["output"].drop_nulls().len() >= 1
    check_multi_turn(tmp_path)


def check_multi_turn(out: Path) -> None:
    """Every multi-turn case graded with BFCL's verdict; constrained steps are call lists of offered functions."""
    constrained, free = (pl.read_parquet(out / f"multi_{c}.parquet") for c in ("xgrammar", "none"))
    for table in (constrained, free):
        assert table["setting"].to_list() == ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                                              "multi_turn_long_context"]
        assert table["official_correct"].null_count() == 0 and table["official_error_type"].null_count() == \
            table["official_correct"].sum(), table.select("sample_id", "official_error_type")
        assert table["end_reason"].is_in(["finished", "force_quit", "too_long"]).all(), table["end_reason"]
    assert (constrained["model_calls"] >= 1).all() and (free["model_calls"] >= 1).all()
    for trace, functions, held_out in constrained.select("trace", "functions", "held_out").rows():
        names = {f["name"] for f in json.loads(functions)} | {f["name"] for fs in json.loads(held_out).values() for f in fs}
        steps = [step for turn in json.loads(trace) for step in turn["steps"]]
        assert steps
        for step in steps:  # the grammar's steps: a call list of offered functions, or [] (cut at the token budget)
            assert step["text"].startswith("["), step["text"]
            if step["finish_reason"] == "stop":
                assert step["text"].endswith("]") and all(c.split("(")[0] in names for c in step.get("calls", []))
