"""BFCL with the real vLLM CPU engine and the embedded model: the first case of every category,
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

from tests.conftest import REPO

pytestmark = [pytest.mark.vllm, pytest.mark.shared_data]
MAX_NEW_TOKENS = 48


def drive(out: str, data: str) -> None:
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

    cfg, benchmark = _typed(["dataset=bfcl", f"dataset.path={data}", "dataset.limit=1", "decoding.constraint=xgrammar",
                             f"decoding.max_new_tokens={MAX_NEW_TOKENS}", "engine.cache=false",
                             "engine.cpu_kvcache_gib=0.25"])
    samples = with_texts(load_samples(cfg, benchmark), OWN)
    generator = Generator(Role.of(cfg), Path(out), Timer())
    plan = plan_prompts(cfg, benchmark, generator.tokenizer)
    prompts = build_prompts(cfg, samples, generator.tokenizer, generator.max_model_len, plan)
    for constraint in ("xgrammar", "none"):
        table = collect(prompts, generator.generate(requests_for(prompts, constraint, plan)))
        table = table.with_columns(pl.lit(None, dtype=pl.String).alias("calls"),
                                   pl.lit(None, dtype=pl.String).alias("call_reader"))
        grade(table).drop("prompt_token_ids", strict=False).write_parquet(Path(out) / f"{constraint}.parquet")
    (Path(out) / "engine.json").write_text(json.dumps(generator.stats), encoding="utf-8")


def test_every_category_gives_graded_rows_constrained_and_free(tmp_path, bfcl_data, embedded_model, scratch_env):
    code = f"from tests.inference.test_bfcl_vllm import drive; drive({str(tmp_path)!r}, {str(bfcl_data)!r})"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=scratch_env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
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
