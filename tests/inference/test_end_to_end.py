"""The `toolsweep` command end to end: replayed gold answers, and the real vLLM CPU engine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from grading.report import read_metadata, sample_schema
from grading.scoring import get_scorer
from inference.gold import gold_outputs, write_predictions
from inference.benchmarks.petoolbench import load_petoolbench
from tests.conftest import REPO, SAMPLE, tiny_args
from tests.gold_coverage import assert_documented
from tests.warm import toolsweep

TOOLSWEEP = [sys.executable, "-m", "inference.cli"]
METRICS = ("tool_acc", "param_acc", "call_acc", "format_valid", "gold_schema_coverage")


def run_toolsweep(run_dir: Path, overrides: list[str], env: dict[str, str] | None = None,
                  timeout: int = 900) -> subprocess.CompletedProcess:
    """Run the CLI as a user would, into `run_dir`, and return the finished process (in this
    pytest process's warm worker where `env` is the session's scratch one: tests/warm.py)."""
    return toolsweep([f"hydra.run.dir={run_dir}", *overrides], env, timeout)


def terminal_lines(text: str) -> list[str]:
    """The lines a terminal would show: a progress bar redraws itself with \\r (which text-mode
    pipes turn into newlines), so successive states of one bar are one line."""
    lines: list[str] = []
    for line in text.split("\n"):
        bar = re.match(r"^([^:\n]+): +\d+%\|", line)
        if not line.strip():
            continue
        if bar and lines and lines[-1].startswith(bar.group(1) + ":"):
            lines[-1] = line
        else:
            lines.append(line)
    return lines


def test_terminal_lines_collapse_progress_bar_redraws():
    text = "[toolsweep] a\n\ngen:   0%|  | 0/6\ngen:  50%|# | 3/6\ngen: 100%|##| 6/6\n\ngrading: 100%|##| 2/2\nend\n"
    assert terminal_lines(text) == ["[toolsweep] a", "gen: 100%|##| 6/6", "grading: 100%|##| 2/2", "end"]


def _gold_file(tmp_path: Path, dataset: Path) -> Path:
    return write_predictions(gold_outputs(load_petoolbench(dataset, ["p", "r", "c"])), tmp_path / "gold.jsonl")


def test_replaying_sample_gold_scores_one(tmp_path):
    done = run_toolsweep(tmp_path / "run", ["engine=replay", f"engine.predictions={_gold_file(tmp_path, SAMPLE)}"])
    assert done.returncode == 0, done.stderr
    metrics = pl.read_parquet(tmp_path / "run" / "metrics.parquet")
    assert metrics.height == 8  # (p, r, c, all) x (official, json)
    assert metrics.select(METRICS).min_horizontal().min() == 1.0
    assert "| all | official | 30 | 100.0% |" in done.stdout
    facts = json.loads((tmp_path / "run" / "run.json").read_text())
    assert facts["backend"] == "replay" and facts["status"] == "complete"


def test_replaying_all_3000_petoolbench_gold_answers_scores_one(tmp_path, petoolbench_file):
    done = run_toolsweep(tmp_path / "run", ["dataset=petoolbench", f"dataset.path={petoolbench_file}",
                                            "engine=replay", f"engine.predictions={_gold_file(tmp_path, petoolbench_file)}"])
    assert done.returncode == 0, done.stderr
    metrics = pl.read_parquet(tmp_path / "run" / "metrics.parquet")
    assert metrics.filter(setting="all")["n"].to_list() == [3000, 3000]
    for column in METRICS:
        assert metrics[column].min() == 1.0, column
    assert_documented("petoolbench", metrics)


def test_replay_rejects_unknown_and_duplicate_ids_and_counts_missing(tmp_path):
    preds = tmp_path / "preds.jsonl"
    good = gold_outputs(load_petoolbench(SAMPLE, ["p"]))
    write_predictions(pl.concat([good, pl.DataFrame({"sample_id": ["p-1"], "output": ["{}"]})]), preds)
    done = run_toolsweep(tmp_path / "a", ["engine=replay", f"engine.predictions={preds}", "dataset.settings=[p]"])
    assert done.returncode == 2
    assert "engine.predictions has 1 sample ids that are not in the dataset: p-1." in done.stderr
    assert "Traceback" not in done.stderr
    write_predictions(pl.concat([good, good.head(1)]), preds)
    done = run_toolsweep(tmp_path / "b", ["engine=replay", f"engine.predictions={preds}", "dataset.settings=[p]"])
    assert done.returncode == 2 and "1 duplicate sample ids" in done.stderr
    write_predictions(good.head(4), preds)
    done = run_toolsweep(tmp_path / "c", ["engine=replay", f"engine.predictions={preds}", "dataset.settings=[p]"])
    assert done.returncode == 0, done.stderr
    assert "replay: 6 samples have no prediction and count as wrong (failure 'missing'): p-900005," in done.stderr
    samples = pl.read_parquet(tmp_path / "c" / "samples.parquet")
    assert samples["failure"].value_counts().sort("failure").rows() == [(None, 4), ("missing", 6)]
    assert pl.read_parquet(tmp_path / "c" / "metrics.parquet").filter(setting="p")["tool_acc"][0] == 0.4


def test_user_errors_exit_2_with_one_message(tmp_path):
    done = run_toolsweep(tmp_path / "run", ["model=local", f"model.path={tmp_path}/missing",
                                            "decoding.constraint=lmfe"])
    assert done.returncode == 2
    assert "invalid configuration" in done.stderr and "lmfe" in done.stderr and "missing' does not exist" in done.stderr
    assert "Traceback" not in done.stderr


def check_run_around_answers(run_dir: Path, done: subprocess.CompletedProcess, constraint: str,
                             ids: list[str] | None, one_shard: bool = True) -> pl.DataFrame:
    """What any real vLLM run of the bundled sample must show, whatever the model answered: rows
    in the declared schema, run facts, the dtype chosen, and a quiet console (toolsweep's phases
    with progress bars and the table; the libraries' logs in run.log; a run of many shards shows
    a line and bars per shard, so its line count is not checked). Returns the samples."""
    assert done.returncode == 0, done.stderr[-4000:]
    samples = pl.read_parquet(run_dir / "samples.parquet")
    assert list(samples.columns) == list(sample_schema(get_scorer("petoolbench")))
    assert ids is None or samples["sample_id"].to_list() == ids
    assert samples["finish_reason"].is_in(["stop", "length"]).all()
    assert (samples["prompt_tokens"] > 300).all() and (samples["output_tokens"] > 0).all()
    facts = json.loads((run_dir / "run.json").read_text())
    assert facts["backend"] == constraint
    assert facts["decoding"]["greedy"] is True
    lines = terminal_lines(done.stdout) + terminal_lines(done.stderr)
    assert len(lines) <= 25 or not one_shard, "\n".join(lines)
    assert "generating: 100%" in done.stderr and "| all | official |" in done.stdout
    assert not any(noise in done.stderr for noise in ("Loading safetensors", "INFO", "Triton", "NUMA"))
    assert "vllm" in (run_dir / "run.log").read_text()
    native = facts["machine"]["cpu"]["native_bf16"]
    assert facts["dtype"]["resolved"] == ("bfloat16" if native else "float32"), facts["dtype"]
    assert set(facts["wall_s"]) >= {"prompts", "model_load", "generate", "grade", "total"}
    assert read_metadata(run_dir / "metrics.parquet")["toolsweep_run"]["backend"] == constraint
    return samples


@pytest.mark.vllm
def test_vllm_cpu_engine_with_embedded_model(tmp_path, embedded_model, scratch_env):
    """Real vLLM CPU engine, embedded SmolLM2 under outlines, one record per setting of the bundled
    sample: its answers are the subject (a call to a candidate, in the compact form the constraint
    writes). Free decoding's run is checked the same way on the crash test's baseline
    (tests/inference/test_resume.py), where the tiny model serves it."""
    run_dir = tmp_path / "run"
    done = run_toolsweep(run_dir, ["dataset.limit=1", "decoding.constraint=outlines"], env=scratch_env)
    samples = check_run_around_answers(run_dir, done, "outlines", [f"{s}-900001" for s in "prc"])
    tools = {row["sample_id"]: [t["tool_name"] for t in json.loads(row["tools"])]
             for row in load_petoolbench(SAMPLE, ["p", "r", "c"], 1).iter_rows(named=True)}
    for sample_id, output, reason in samples.select("sample_id", "output", "finish_reason").iter_rows():
        assert "\n" not in output and not re.search(r'[{,:]\s|\s[}]', output.split('"parameters":')[0])
        name = re.match(r'\{"tool_name":"(.*?)","parameters":\{', output)
        assert name and json.loads(f'"{name.group(1)}"') in tools[sample_id], output
        if reason == "stop":
            assert json.loads(output)["tool_name"] in tools[sample_id]


def test_transformers_engine_with_outlines_constraint(tmp_path, tiny_model, scratch_env):
    """HF generate + the outlines library on one sample, on the tiny seeded model: its logits are
    noise, so an answer that is compact JSON naming a candidate tool is the constraint's doing
    (a trained model might write one unconstrained)."""
    run_dir = tmp_path / "run"
    def compiled() -> set[Path]:  # torch.compile's artifacts: TMPDIR/torchinductor_<user>
        return set(Path(scratch_env["TMPDIR"]).glob("torchinductor_*/**/*"))

    before = compiled()
    done = run_toolsweep(run_dir, [*tiny_args(tiny_model, vllm=False, max_new_tokens=48), "engine=transformers",
                                   "dataset.limit=1", "dataset.settings=[p]"], env=scratch_env)
    assert done.returncode == 0, done.stderr[-4000:]
    # outlines' mask kernel runs eagerly on the CPU: nothing compiled (it cost ~10 s of g++ per process)
    assert compiled() == before, sorted(compiled() - before)[:5]
    row = pl.read_parquet(run_dir / "samples.parquet").row(0, named=True)
    candidates = [t["tool_name"] for t in json.loads(load_petoolbench(SAMPLE, ["p"], 1)["tools"][0])]
    name = re.match(r'\{"tool_name":"(.*?)","parameters":\{', row["output"])
    assert name and json.loads(f'"{name.group(1)}"') in candidates, row["output"]
    assert row["finish_reason"] in ("stop", "length") and row["output_tokens"] > 0, row
    # noise rarely closes the call in 48 tokens: `stop` only for a whole call, a cut one is `length`
    assert (row["finish_reason"] == "stop") == row["json_valid"] == row["official_valid"], row
    assert json.loads((run_dir / "run.json").read_text())["engine"] == "transformers"


def gold_file(name: str, folder: Path, path: Path) -> Path:
    """The benchmark's gold answers in its authors' answer format (FamilyTool: Hermes tool calls)."""
    from inference.benchmarks import get_benchmark, load_dataset

    benchmark = get_benchmark(name)
    samples = load_dataset(name, folder, benchmark.settings)
    return write_predictions(gold_outputs(samples, benchmark.prompt_format), path)


@pytest.mark.parametrize("dataset", ["familytool_sample", "toolspectrum_sample"])
def test_replaying_gold_of_other_benchmarks_scores_one(tmp_path, embedded_model, dataset):
    """Gold replay through the CLI: every metric the scorer defines is 1.0, the others absent.
    FamilyTool's gold goes through the native format: Hermes blocks read by vLLM's parser."""
    cfg_name = dataset.removesuffix("_sample")
    preds = gold_file(cfg_name, REPO / "datasets" / dataset, tmp_path / "gold.jsonl")
    done = run_toolsweep(tmp_path / "run", [f"dataset={dataset}", "engine=replay", f"engine.predictions={preds}"])
    assert done.returncode == 0, done.stderr
    metrics = pl.read_parquet(tmp_path / "run" / "metrics.parquet").filter(setting="all")
    defined = [c for c in metrics.columns if metrics[c].dtype == pl.Float64 and metrics[c].null_count() == 0]
    assert {c: metrics[c].min() for c in defined} == {c: 1.0 for c in defined}
    expected = {"familytool": {"tool_acc", "param_acc", "call_acc", "format_valid"},
                "toolspectrum": {"app_f1", "api_f1", "app_api_f1", "required_f1", "personalized_f1",
                                 "environmental_f1", "format_valid", "refusal_precision", "refusal_recall"}}[cfg_name]
    assert set(defined) == expected | {"gold_schema_coverage"}
    facts = json.loads((tmp_path / "run" / "run.json").read_text())
    assert facts["prompt"]["format"] == ("native" if cfg_name == "familytool" else "benchmark")


def _settings(name: str) -> tuple[str, ...]:
    from inference.benchmarks import get_benchmark

    return get_benchmark(name).settings


@pytest.mark.vllm
def test_vllm_familytool_native_calls_are_read_by_the_family_parser(tmp_path, tiny_model, scratch_env):
    """Real vLLM CPU engine, FamilyTool's default native format, one case per setting of the
    bundled sample: SmolLM2's template ignores tools=, so they go in a tool block; the outlines
    grammar writes Hermes <tool_call> blocks, and vLLM's hermes parser reads every finished one.
    The tiny seeded model (SmolLM2's tokenizer and template): the grammar's hold and the parser's
    reading are the subject, which noise inside the grammar shows as well as any model's answers."""
    from inference.benchmarks import load_dataset

    run_dir = tmp_path / "run"
    done = run_toolsweep(run_dir, ["dataset=familytool_sample", "dataset.limit=1",
                                   *tiny_args(tiny_model, max_new_tokens=None)], env=scratch_env)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "prompt format: native (tool parser hermes; tools given in a tool block" in done.stdout
    facts = json.loads((run_dir / "run.json").read_text())
    assert facts["prompt"]["tool_parser"] == "hermes" and facts["scorer"] == "unifiedtoolhub"
    assert "ignores tools=" in facts["prompt"]["tools_in"]
    samples = pl.read_parquet(run_dir / "samples.parquet")
    table = load_dataset("familytool", REPO / "datasets" / "familytool_sample", _settings("familytool"), limit=1)
    candidates = {r["sample_id"]: {t["tool_name"] for t in json.loads(r["tools"])} for r in table.iter_rows(named=True)}
    finished = samples.filter(pl.col("finish_reason") == "stop")
    assert finished.height >= 1 and samples["failure"].drop_nulls().is_in(["length"]).all(), samples.rows()
    for sample_id, output, calls in finished.select("sample_id", "output", "calls").rows():
        assert output.startswith("<tool_call>\n{") and output.rstrip().endswith("</tool_call>"), output
        read = json.loads(calls)
        assert read and all(c["name"] in candidates[sample_id] for c in read), (output, calls)
    assert finished["official_valid"].all()


@pytest.mark.vllm
@pytest.mark.parametrize("dataset", ["toolspectrum_sample"])
def test_vllm_on_other_benchmarks_gives_valid_calls(tmp_path, embedded_model, scratch_env, dataset):
    """Real vLLM CPU engine, one case per setting of the bundled sample, default constraint:
    every finished answer is a call to a candidate (or, where allowed, a refusal) that the
    official parser reads; an answer cut at max_new_tokens is a `length` row, never a crash.
    The run's cache holds a garbage file: it is skipped with a warning, never the end of the run."""
    from inference.benchmarks import load_dataset
    from inference.models import cache_root

    cache = tmp_path / "cache"
    (cache / "generations").mkdir(parents=True)
    (cache / "models").symlink_to(cache_root() / "models", target_is_directory=True)
    (cache / "generations" / "0123.parquet").write_bytes(b"\x00garbage")
    run_dir = tmp_path / "run"
    done = run_toolsweep(run_dir, [f"dataset={dataset}", "dataset.limit=1"],
                         env={**scratch_env, "TOOLSWEEP_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr[-4000:]
    assert "warning: skipping unreadable generation file" in done.stderr and "0123.parquet" in done.stderr
    samples = pl.read_parquet(run_dir / "samples.parquet")
    name = dataset.removesuffix("_sample")
    assert samples.height == len(_settings(name))
    table = load_dataset(name, REPO / "datasets" / dataset, _settings(name), limit=1)
    candidates = {r["sample_id"]: ({t["tool_name"] for t in json.loads(r["tools"])}, r["allow_refusal"])
                  for r in table.iter_rows(named=True)}
    finished = samples.filter(pl.col("finish_reason") == "stop")
    assert finished.height >= 1 and samples["failure"].drop_nulls().is_in(["length"]).all(), samples.rows()
    assert finished["official_valid"].all() and finished["json_valid"].all()
    for sample_id, output in finished.select("sample_id", "output").rows():
        call = json.loads(output)
        names, refusal_allowed = candidates[sample_id]
        assert list(call) == ["tool_name", "parameters"], output
        assert call["tool_name"] in names or (refusal_allowed and call == {"tool_name": None, "parameters": None}), output


@pytest.mark.shared_data
@pytest.mark.parametrize("name,counts", [
    ("familytool", {"b": 483, "e": 455, "b_retrieve": 483, "e_retrieve": 455, "all": 1876}),
    ("toolspectrum", {"persona": 449, "environment": 220, "persona_environment": 333, "all": 1002}),
])
def test_replaying_all_real_gold_scores_one(tmp_path, request, name, counts):
    """The whole real benchmark, gold replayed through the CLI: counts as in SOURCE.md, 1.0 on
    every metric the benchmark defines (schema coverage is reported, not replayed)."""
    folder = request.getfixturevalue(f"{name}_dir")
    request.getfixturevalue("embedded_model")  # FamilyTool's native replay reads calls with its tokenizer
    preds = gold_file(name, folder, tmp_path / "gold.jsonl")
    done = run_toolsweep(tmp_path / "run", [f"dataset={name}", f"dataset.path={folder}", "engine=replay",
                                            f"engine.predictions={preds}"])
    assert done.returncode == 0, done.stderr
    metrics = pl.read_parquet(tmp_path / "run" / "metrics.parquet")
    assert dict(metrics.filter(parser="official").select("setting", "n").rows()) == counts
    scores = metrics.drop("setting", "parser", "n", "n_failed", "n_too_long", "gold_schema_coverage")
    defined = [c for c in scores.columns if scores[c].null_count() < scores.height]
    assert {c: metrics[c].drop_nulls().min() for c in defined} == {c: 1.0 for c in defined}
    assert_documented(name, metrics)


def test_replay_reads_native_tool_calls_made_elsewhere(tmp_path, embedded_model):
    """engine=replay prompt.format=native model.tool_parser=hermes: <tool_call> blocks written by
    another system are read by vLLM's hermes parser and graded by PEToolBench's rules."""
    preds = write_predictions(gold_outputs(load_petoolbench(SAMPLE, ["p", "r", "c"]), "native"), tmp_path / "gold.jsonl")
    assert pl.read_ndjson(preds)["output"][0].startswith('<tool_call>\n{"name":')
    done = run_toolsweep(tmp_path / "run", ["engine=replay", f"engine.predictions={preds}", "prompt.format=native",
                                            "model.tool_parser=hermes"])
    assert done.returncode == 0, done.stderr
    metrics = pl.read_parquet(tmp_path / "run" / "metrics.parquet")
    assert metrics.select(METRICS).min_horizontal().min() == 1.0
    samples = pl.read_parquet(tmp_path / "run" / "samples.parquet")
    assert samples["prompt_format"].unique().to_list() == ["native"] and samples["calls"].null_count() == 0
