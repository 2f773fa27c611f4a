"""decoding.samples=k end to end: replayed k outputs per record, and k real vLLM samples that
survive a kill."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from inference.cache import request_key
from inference.engines import Request, request_seed
from inference.gold import gold_outputs
from inference.benchmarks.petoolbench import load_petoolbench
from tests.warm import toolsweep
from tests.conftest import SAMPLE, tiny_args
from tests.inference.test_end_to_end import run_toolsweep
from tests.inference.test_resume import _command, _kill_at

WRONG = json.dumps({"tool_name": "<Nowhere>.<Nothing>.<Nil>", "parameters": {}})
# How often each of the first four p records is answered right in its five samples.
RIGHT = {"p-900001": [0, 1, 2, 3, 4], "p-900002": [0, 2, 4], "p-900003": [3], "p-900004": []}


def _replay_file(path: Path) -> Path:
    gold = dict(gold_outputs(load_petoolbench(SAMPLE, ["p"])).iter_rows())
    rows = [{"sample_id": record, "sample_index": i, "output": gold[record] if i in right else WRONG}
            for record, right in RIGHT.items() for i in range(5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_replayed_samples_give_pass_at_k_and_pass_hat_k_by_hand(tmp_path):
    run = tmp_path / "run"
    done = run_toolsweep(run, ["engine=replay", f"engine.predictions={_replay_file(tmp_path / 'k5.jsonl')}",
                               "dataset.settings=[p]", "dataset.limit=4", "decoding.samples=5"])
    assert done.returncode == 0, done.stderr[-3000:]
    samples = pl.read_parquet(run / "samples.parquet")
    assert samples.height == 20 and samples["sample_id"][:2].to_list() == ["p-900001#0", "p-900001#1"]
    assert samples.group_by("record_id").len()["len"].to_list() == [5] * 4
    assert samples["failure"].null_count() == 20
    row = pl.read_parquet(run / "metrics.parquet").filter(
        (pl.col("setting") == "all") & (pl.col("parser") == "official")).row(0, named=True)
    assert row["samples"] == 5
    assert row["call_acc"] == pytest.approx(9 / 20)
    # right per sample index: 0: 2 of 4, 1: 1, 2: 2, 3: 2, 4: 2 -> 0.5, 0.25, 0.5, 0.5, 0.5
    assert row["call_acc_sd"] == pytest.approx(math.sqrt((4 * 0.05 ** 2 + 0.2 ** 2) / 4))
    assert row["call_acc_pass_at_k"] == pytest.approx(3 / 4)
    assert row["call_acc_pass_hat_k"] == pytest.approx(1 / 4)
    curve = pl.read_parquet(run / "passk.parquet").filter(
        (pl.col("setting") == "all") & (pl.col("parser") == "official") & (pl.col("metric") == "call_acc"))
    k3 = curve.filter(pl.col("k") == 3).row(0, named=True)
    # C(5,3) = 10 triples: 3 right of 5 miss in none with 2 wrong < 3; 1 right misses in C(4,3) = 4
    assert k3["pass_at"] == pytest.approx((1 + 1 + (1 - 4 / 10) + 0) / 4)
    assert k3["pass_hat"] == pytest.approx((1 + 1 / 10 + 0 + 0) / 4)
    assert "call_acc pass@k" in (run / "metrics.md").read_text()
    facts = json.loads((run / "run.json").read_text())
    assert facts["decoding"]["samples_per_record"] == 5


def test_replay_refuses_sample_indexes_the_run_does_not_have(tmp_path):
    done = run_toolsweep(tmp_path / "run", ["engine=replay", f"engine.predictions={_replay_file(tmp_path / 'k5.jsonl')}",
                                            "dataset.settings=[p]", "dataset.limit=4", "decoding.samples=3"])
    assert done.returncode == 2
    assert "sample_index values 3, 4 outside 0..2" in done.stderr and "decoding.samples" in done.stderr


@pytest.mark.parametrize("overrides,message", [
    (["decoding.samples=3"], "decoding.samples=3 with decoding.temperature=0 asks for 3 copies"),
    (["decoding.samples=0"], "decoding.samples must be an integer >= 1, got 0"),
])
def test_samples_options_are_checked(tmp_path, embedded_model, overrides, message):
    done = run_toolsweep(tmp_path / "run", ["model=smollm2-135m", *overrides])
    assert done.returncode == 2 and message in done.stderr, done.stderr[-2000:]


def test_a_first_sample_keeps_the_key_of_a_one_sample_run_and_the_others_differ():
    request = Request(sample_id="p-1", prompt="", prompt_token_ids=(1, 2, 3), schema_json=None)
    keys = [request_key(Request(**{**request.__dict__, "sample_index": i}), {"x": 1}) for i in range(3)]
    assert keys[0] == request_key(request, {"x": 1}) and len(set(keys)) == 3
    assert request_seed(7, 0) == 7
    assert len({request_seed(s, i) for s in range(4) for i in range(4)}) == 16


@pytest.mark.vllm
def test_vllm_samples_differ_and_a_killed_run_keeps_its_finished_samples(tmp_path, tiny_model, scratch_env):
    """Three samples at temperature 0.7 of each bundled record under the outlines grammar, six
    requests a shard (more prompt tokens than one chunked vLLM step takes: there seeded,
    constrained sampling on CPU failed the batch): killed after the first shard, the rerun
    generates only the last three, and every record has three different answers (a random
    model's sampled tokens, 64 of them: the grammar forces the calls' first tokens)."""
    args = [*tiny_args(tiny_model, max_new_tokens=64), "dataset.limit=1", "decoding.samples=3",
            "decoding.temperature=0.7", "engine.shard_size=6", "engine.cache=false"]
    run = tmp_path / "run"
    killed = _kill_at(run, args, scratch_env, "shard 2/", True, 0.0)
    assert "batch failed" not in killed, killed[-3000:]
    parts = sorted((run / "parts").glob("part-*.parquet"))
    first = pl.read_parquet(parts).select("cache_key", "output")
    assert first.height == 6
    # the rerun needs no process of its own (nothing kills it): it runs on the warm command worker
    done = toolsweep(_command(run, args)[3:], env=scratch_env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    # vLLM's CPU runner fails seeded requests whose prefill is chunked, and the engine then
    # retries one request at a time: the run must not need that.
    assert "batch failed" not in done.stderr, done.stderr[-3000:]
    facts = json.loads((run / "run.json").read_text())
    assert facts["generation"] == {"engine_calls": 3, "stored_hits": 6, "shards": 1}
    samples = pl.read_parquet(run / "samples.parquet")
    assert samples.height == 9 and samples["sample_index"].to_list() == [0, 1, 2] * 3
    distinct = samples.group_by("record_id").agg(pl.col("output").n_unique())["output"].to_list()
    assert distinct == [3, 3, 3], samples.select("sample_id", "output")
    kept = pl.read_parquet(sorted((run / "parts").glob("part-*.parquet"))).select("cache_key", "output")
    assert kept["cache_key"].is_unique().all() and first.join(kept, on="cache_key")["output"].to_list() == \
        first["output"].to_list()


def test_a_sweeps_leaderboard_shows_the_spread_and_pass_columns(tmp_path):
    """A sweep over the number of samples: the board has each job's k, its spread and pass
    columns; the job whose file holds more samples than it asks for fails with the reason."""
    sweep = tmp_path / "sweep"
    done = toolsweep(["-m", f"hydra.sweep.dir={sweep}", "engine=replay",
                      f"engine.predictions={_replay_file(tmp_path / 'k5.jsonl')}", "dataset.settings=[p]",
                      "dataset.limit=4", "decoding.samples=5,1"], timeout=600)
    board = pl.read_parquet(sweep / "leaderboard.parquet").sort("job")
    complete = board.filter((pl.col("setting") == "all") & (pl.col("parser") == "official"))
    assert complete["samples"].to_list() == [5] and complete["call_acc"].to_list() == [pytest.approx(0.45)]
    assert complete["call_acc_pass_hat_k"].to_list() == [pytest.approx(0.25)]
    failed = board.filter(pl.col("status") == "failed")
    assert failed["job"].to_list() == [1] and "outside 0..0" in failed["reason"][0]
    text = (sweep / "leaderboard.md").read_text()
    assert "call_acc pass^k" in text and "45.0% [" in text and "±" in text, text
