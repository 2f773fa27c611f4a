"""Sweep leaderboard: steps from folder names, complete and failed jobs, the written files."""

from __future__ import annotations

import re

import polars as pl
import pyarrow.parquet as pq
import pytest

from grading.errors import GradingError
from grading.leaderboard import build_leaderboard, leaderboard_schema, write_leaderboard
from grading.scoring import get_scorer

LEADERBOARD_SCHEMA = leaderboard_schema([get_scorer("petoolbench")])
from grading.sweep import NO_JOB_JSON, job_step, override_key, override_value, parse_step
from tests.grading.conftest import complete_job, make_samples, write_job

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# (id, model path, expected step, reason)
STEP_CASES = [
    ("hf_trainer", "/ckpt/run/checkpoint-500", 500, "Hugging Face Trainer folders"),
    ("underscore", "/ckpt/step_500", 500, "step_N"),
    ("glued", "/ckpt/step500", 500, "stepN"),
    ("deepspeed", "/ckpt/global_step500", 500, "DeepSpeed's global_stepN"),
    ("trailing_slash", "/ckpt/checkpoint-20/", 20, "a path typed with a trailing slash"),
    ("case", "/ckpt/Checkpoint-7", 7, "case does not matter"),
    ("only_last_part", "/ckpt/checkpoint-500/merged", None, "only the last component counts"),
    ("base_model", "/models/SmolLM2-135M-Instruct", None, "a base model has no step"),
    ("no_path", None, None, "the job used the default model"),
]


@pytest.mark.parametrize("path,expected", [c[1:3] for c in STEP_CASES], ids=[c[0] for c in STEP_CASES])
def test_parse_step(path, expected):
    assert parse_step(path) == expected


# (id, model path, overrides, expected step, reason)
JOB_STEP_CASES = [
    ("model_path_wins", "/c/checkpoint-5", ["model.lora=/l/checkpoint-9"], 5, "the model folder names the step"),
    ("lora", "/models/base", ["model.lora=/l/checkpoint-9"], 9, "a LoRA adapter folder names the step"),
    ("lora_appended", "/models/base", ["+model.lora=/l/step_3"], 3, "Hydra's +key= form"),
    ("lora_quoted", "/models/base", ["model.lora='/l/checkpoint-4'"], 4, "a quoted override value"),
    ("none", "/models/base", ["decoding.constraint=none"], None, "nothing names a step"),
]


@pytest.mark.parametrize("path,overrides,expected", [c[1:4] for c in JOB_STEP_CASES],
                         ids=[c[0] for c in JOB_STEP_CASES])
def test_job_step(path, overrides, expected):
    assert job_step(path, overrides) == expected


# (id, override as job.json holds it, the value, reason)
OVERRIDE_TEXT_CASES = [
    ("plain", "model.path=/ckpt/checkpoint-5", "/ckpt/checkpoint-5", "nothing to read"),
    ("escaped_space", "model.path=my\\ runs/checkpoint-5", "my runs/checkpoint-5", "Hydra's sweeper escapes a space"),
    ("bare_space", "model.path=my runs/checkpoint-5", "my runs/checkpoint-5", "a space inside an unquoted value"),
    ("single_quoted", "model.path='my runs/ckpt'", "my runs/ckpt", "a quoted value"),
    ("double_quoted", 'model.path="my runs/ckpt"', "my runs/ckpt", "either quote"),
    ("quote_inside", "a='it\\'s'", "it's", "an escaped quote inside quotes"),
    ("backslash_before_close", "a='x\\\\'", "x\\", "a backslash escaped before the closing quote"),
    ("backslash_in_quotes", "a='c:\\x'", "c:\\x", "any other backslash in quotes is itself"),
    ("escaped_comma", "a=x\\,y", "x,y", "an escaped sweep separator"),
    ("escaped_backslash", "a=\\\\srv", "\\srv", "two backslashes are one"),
    ("lone_backslash", "a=C:\\x\\y", "C:\\x\\y", "a backslash before a plain character is itself"),
    ("padded", "a=  x  ", "x", "whitespace around a value is not part of it"),
    ("escaped_trailing_space", "a=x\\ ", "x ", "unless escaped"),
    ("interpolation", "a=${oc.env:HOME}/x", "${oc.env:HOME}/x", "an interpolation is kept as written"),
]


@pytest.mark.parametrize("override,expected", [c[1:3] for c in OVERRIDE_TEXT_CASES],
                         ids=[c[0] for c in OVERRIDE_TEXT_CASES])
def test_an_override_value_reads_as_hydra_reads_it(override, expected):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    assert OverridesParser.create().parse_override(override).value() == expected, "the case itself is Hydra's"
    assert override_value([override], override_key(override)) == expected


def test_leaderboard_rows(sweep_dir):
    board = build_leaderboard(sweep_dir)
    assert board.schema == pl.Schema(LEADERBOARD_SCHEMA)
    assert board.height == 2 * 3 * 2 + 1, "2 complete jobs x (p, r, all) x 2 parsers + 1 failed job"
    assert board["job"].to_list() == sorted(board["job"].to_list())
    early = board.filter(job=0, setting="all", parser="official").row(0, named=True)
    assert (early["model"], early["model_path"], early["step"]) == ("checkpoint-500", "/ckpt/run/checkpoint-500", 500)
    assert (early["n"], early["tool_acc"], early["call_acc"]) == (8, 3 / 8, 1 / 8)
    assert (early["prompts_per_s"], early["output_tokens_per_s"]) == (2.5, 50.0)
    assert (early["status"], early["reason"], early["overrides"]) == ("complete", None,
                                                                      ["model.path=/ckpt/run/checkpoint-500"])
    late = board.filter(job=1, setting="p", parser="json").row(0, named=True)
    assert (late["step"], late["n"], late["tool_acc"], late["call_acc"]) == (1000, 4, 1.0, 0.75)


def test_leaderboard_cis_bracket_the_accuracies(sweep_dir):
    complete = build_leaderboard(sweep_dir).filter(status="complete")
    for metric in ("tool_acc", "param_acc", "call_acc"):
        assert (complete[f"{metric}_low"] <= complete[metric]).all()
        assert (complete[metric] <= complete[f"{metric}_high"]).all()
    wide = complete.filter(job=0, setting="p", parser="official").row(0, named=True)
    assert wide["tool_acc_low"] < wide["tool_acc"] < wide["tool_acc_high"], "4 samples: a real interval"


def test_failed_job_keeps_its_reason(sweep_dir):
    failed = build_leaderboard(sweep_dir).filter(job=2)
    assert failed.select("setting", "parser", "status", "reason").rows() == [
        ("all", None, "failed", "CUDA out of memory")], "its scorer is unknown: one row, no reading"
    assert failed["step"].to_list() == [1500]
    for column in ("n", "tool_acc", "tool_acc_low", "param_acc", "call_acc_high", "format_valid", "prompts_per_s"):
        assert failed[column].null_count() == 1, column


def test_write_leaderboard_files(sweep_dir):
    paths = write_leaderboard(sweep_dir)
    assert [p.name for p in paths] == ["leaderboard.parquet", "leaderboard.md", "leaderboard.png", "against_first.parquet", "report.html"]
    assert pq.read_schema(paths[0]).names == list(LEADERBOARD_SCHEMA)
    assert pl.read_parquet(paths[0]).equals(build_leaderboard(sweep_dir))
    markdown = paths[1].read_text(encoding="utf-8")
    assert re.search(r"\| 0 \| model\.path=checkpoint-500 \| checkpoint-500 \| 500 \| all \| official \| 37\.5% "
                     r"\[\d+\.\d, \d+\.\d\] \|", markdown), "each job is named by the overrides that differ"
    assert "| 2 | model.path=checkpoint-1500 | checkpoint-1500 | 1500 | all |  |  |  |  | failed | CUDA out of memory |" in markdown
    png = paths[2].read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000
    against = pl.read_parquet(paths[3])
    assert set(against["job"]) == {1}, "job 1 against job 0; the failed job 2 has no samples"
    headline = {m.name for m in get_scorer("petoolbench").metrics if m.headline}
    assert set(against["metric"]) == headline and set(against["parser"]) == {"official"}, "headline, primary"
    assert "<h2>Against the first job</h2>" in paths[4].read_text(encoding="utf-8")


def test_jobs_without_steps_get_no_plot(tmp_path):
    samples = make_samples({"p": ["call", "tool"]})
    for number, constraint in enumerate(("outlines", "none")):
        write_job(tmp_path, number, [f"decoding.constraint={constraint}"], samples, complete_job(None))
    paths = write_leaderboard(tmp_path)
    assert [p.name for p in paths] == ["leaderboard.parquet", "leaderboard.md", "against_first.parquet", "report.html"]
    board = pl.read_parquet(paths[0])
    assert board["model_path"].unique().to_list() == ["/models/tiny"], "from run.json when job.json has none"
    assert board["step"].null_count() == board.height


def test_plot_separates_configurations(tmp_path):
    # Checkpoints x constraints: one line per constraint, and still one PNG.
    for number, (step, constraint) in enumerate([(5, "outlines"), (5, "none"), (9, "outlines"), (9, "none")]):
        path = f"/c/checkpoint-{step}"
        write_job(tmp_path, number, [f"model.path={path}", f"decoding.constraint={constraint}"],
                  make_samples({"p": ["call", "wrong"][: 1 + number % 2], "c": ["tool"]}), complete_job(path))
    paths = write_leaderboard(tmp_path)
    assert paths[2].name == "leaderboard.png" and paths[2].read_bytes().startswith(PNG_MAGIC)
    assert build_leaderboard(tmp_path)["step"].to_list()[::6] == [5, 5, 9, 9]


def test_jobs_ordered_by_number_and_missing_job_json(tmp_path):
    samples = make_samples({"p": ["call"]})
    write_job(tmp_path, 10, ["model.path=/c/checkpoint-10"], samples, complete_job("/c/checkpoint-10"))
    write_job(tmp_path, 2, ["model.path=/c/checkpoint-2"])  # Hydra started it; it never finished
    board = build_leaderboard(tmp_path)
    assert board["job"].unique(maintain_order=True).to_list() == [2, 10]
    killed = board.filter(job=2).row(0, named=True)
    assert (killed["status"], killed["reason"]) == ("failed", NO_JOB_JSON)
    assert (killed["model_path"], killed["step"]) == ("/c/checkpoint-2", 2), "read from .hydra/overrides.yaml"


@pytest.mark.parametrize("job,break_files,reason", [
    (complete_job("/c/checkpoint-1"), lambda d: (d / "samples.parquet").unlink(), "samples.parquet is missing"),
    (complete_job("/c/checkpoint-1"), lambda d: (d / "samples.parquet").write_bytes(b"not parquet"),
     "results are unreadable"),
    ({"status": "running"}, lambda d: None, "job.json has status 'running'"),
    ({"status": "failed", "reason": None, "returncode": -9}, lambda d: None, "exit code -9"),
    (complete_job("/c/checkpoint-1"),
     lambda d: (d / "state.json").write_text('{"status": "failed", "reason": "EngineError: the judge died"}'),
     "its run has since failed (EngineError: the judge died)"),
    (complete_job("/c/checkpoint-1"), lambda d: (d / "state.json").write_text('{"status": "running"}'),
     "its run has since started again (state running)"),
], ids=["complete_without_samples", "corrupt_samples", "unknown_status", "failed_without_reason",
        "rerun_in_place_that_failed", "rerun_in_place_still_running"])
def test_broken_jobs_become_failed_rows(tmp_path, job, break_files, reason):
    job_dir = write_job(tmp_path, 0, ["model.path=/c/checkpoint-1"], make_samples({"p": ["call"]}), job)
    break_files(job_dir)
    rows = build_leaderboard(tmp_path)
    assert rows["status"].to_list() == ["failed"]
    assert reason in rows["reason"][0]


def test_not_a_sweep_dir(tmp_path):
    with pytest.raises(GradingError, match="holds no numbered job dirs"):
        build_leaderboard(tmp_path)


def _etapp_sweep(root):
    """Two ETAPP checkpoints (the later more personal); tg-0, scored 0, is not clean."""
    from grading.grades import grade
    from tests.grading.conftest import etapp_case, etapp_points, etapp_table

    for number, step in enumerate((100, 200)):
        cases = [etapp_case(f"tg-{i}", "tool_given/fc", (3, (0, 3, 4, 3)[i] + number, 3), etapp_points([2], [1]),
                            (3, 2, 2, 0, 0), "finish", ["t1"], ["t1"], clean=i > 0) for i in range(4)]
        path = f"/ckpt/agent/checkpoint-{step}"
        write_job(root, number, [f"model.path={path}"], grade(etapp_table(cases)), complete_job(path))
    return root


def test_a_sweep_of_a_scorer_without_official_is_plotted(tmp_path):
    """ETAPP's one reading is `judge`: the plot and the sweep report use it."""
    paths = write_leaderboard(_etapp_sweep(tmp_path))
    assert [p.name for p in paths] == ["leaderboard.parquet", "leaderboard.md", "leaderboard.png", "against_first.parquet", "report.html"]
    assert paths[2].read_bytes().startswith(PNG_MAGIC)
    assert 'id="figure-by_step"' in paths[4].read_text(encoding="utf-8")


def test_the_sweep_leaderboard_has_the_subset_rows_with_their_cis(tmp_path):
    board = build_leaderboard(_etapp_sweep(tmp_path))
    assert board.filter(job=0)["setting"].to_list() == ["tool_given/fc", "tool_given/fc/clean", "all", "all/clean"]
    clean = board.filter(job=0, setting="all/clean").row(0, named=True)
    assert (clean["n"], clean["personalization"]) == (3, pytest.approx(10 / 3)), "tg-1..3: 3, 4, 3"
    assert clean["personalization_low"] <= clean["personalization"] <= clean["personalization_high"]
    assert clean["personalization_low"] >= 3.0, "the CI is over the clean cases (tg-0's 0 is not among them)"
