"""`toolsweep export` into the four trackers, read back with each tracker's own reader: a replay
sweep over checkpoint-300, -100, -200 (finishing in that order), every metric at its step, exactly
once, in step order; a second export leaves the same points."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from grading.export import export_series
from grading.trackers import PREFIX, export
from inference.benchmarks.petoolbench import load_petoolbench
from inference.gold import gold_outputs, write_predictions
from tests.conftest import REPO, SAMPLE
from tests.inference.test_sweep import run_sweep

STEPS = (300, 100, 200)
CORRECT = {300: 10, 100: 4, 200: 7}
"""Each checkpoint's replayed answers: the first N of the 10 gold answers (the rest missing)."""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("export")
    gold = gold_outputs(load_petoolbench(SAMPLE, ["p"]))
    for step in STEPS:
        folder = root / "train" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        write_predictions(gold.head(CORRECT[step]), folder / "preds.jsonl")
    paths = ",".join(str(root / "train" / f"checkpoint-{s}") for s in STEPS)
    done = run_sweep(root / "sweep", ["engine=replay", "engine.predictions=${model.path}/preds.jsonl",
                                      f"model.path={paths}", "dataset.settings=[p]"], timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return root / "sweep"


def expected(sweep: Path) -> dict[int, dict[str, float]]:
    """step -> every exported key and its value, from the leaderboard the sweep wrote."""
    series = export_series(sweep)
    assert len(series) == 1 and [p.step for p in series[0].points] == [100, 200, 300]
    board = pl.read_parquet(sweep / "leaderboard.parquet").filter(setting="all", parser="official")
    for point in series[0].points:
        row = board.filter(step=point.step).row(0, named=True)
        assert point.values["all/official/tool_acc"] == row["tool_acc"] == CORRECT[point.step] / 10
        assert point.values["all/official/tool_acc_low"] == row["tool_acc_low"]
    return {p.step: {PREFIX + k: v for k, v in p.values.items()} for p in series[0].points}


def assert_points(found: dict[str, list[tuple[int, float]]], want: dict[int, dict[str, float]]) -> None:
    """`found`: key -> [(step, value)] in the order the tracker returns them."""
    keys = {key for values in want.values() for key in values}
    assert keys <= set(found), sorted(keys - set(found))[:5]
    for key in keys:
        steps = [step for step, _ in found[key]]
        assert steps == sorted(want), (key, steps)  # every step once, ascending
        for step, value in found[key]:
            assert value == pytest.approx(want[step][key], abs=1e-6), (key, step)


def test_tensorboard(sweep, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    want = expected(sweep)
    logdir = tmp_path / "tb"
    for _ in range(2):
        lines = list(export(export_series(sweep), "tensorboard", sweep, destination=logdir))
    runs = [p for p in logdir.iterdir()]
    assert len(runs) == 1 and len(list(runs[0].glob("events.out.tfevents.*"))) == 1, "replaced, not added to"
    reader = EventAccumulator(str(runs[0]), size_guidance={"scalars": 0})
    reader.Reload()
    assert_points({tag: [(e.step, e.value) for e in reader.Scalars(tag)] for tag in reader.Tags()["scalars"]}, want)
    assert "tensorboard --logdir" in lines[-1]


def test_mlflow_new_run_and_an_existing_training_run(sweep, tmp_path):
    from mlflow.tracking import MlflowClient

    want = expected(sweep)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    for _ in range(2):
        list(export(export_series(sweep), "mlflow", sweep, tracking_uri=uri, project="evals"))
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("evals")
    [run] = client.search_runs([experiment.experiment_id])  # the first export's run was replaced
    assert_points({key: [(m.step, m.value) for m in sorted(client.get_metric_history(run.info.run_id, key),
                                                              key=lambda m: m.timestamp)]
                   for key in run.data.metrics}, want)
    params = run.data.params  # prefixed: a training run has params of its own
    assert params["toolsweep.job0.model_path"].endswith("checkpoint-300") and params["toolsweep.engine"] == "replay"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} >= {"leaderboard.md", "report.html"}
    # a training run that logged its loss to step 500: the points join it at their steps, once
    training = client.create_run(experiment.experiment_id, run_name="training").info.run_id
    for step in range(0, 501, 50):
        client.log_metric(training, "train/loss", 2.0 - step / 500, step=step)
    for _ in range(2):
        list(export(export_series(sweep), "mlflow", sweep, tracking_uri=uri, project="evals", run_id=training))
    data = client.get_run(training).data
    assert_points({key: [(m.step, m.value) for m in client.get_metric_history(training, key)]
                   for key in data.metrics if key.startswith(PREFIX)}, want)
    assert len(client.get_metric_history(training, "train/loss")) == 11


def wandb_history(path: Path) -> list[dict]:
    """The history records of an offline run's .wandb file, decoded with W&B's own record schema (wandb
    0.31 ships no Python reader of these files; the framing is LevelDB's log format: 32 KiB blocks of
    chunks with a 7-byte header)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    pos, chunks, found = 7, [], []
    while pos + 7 <= len(data):
        left = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or (length == 0 and kind == 0):
            pos += left
            continue
        chunks.append(data[pos + 7:pos + 7 + length])
        pos += 7 + length
        if kind in (1, 4):  # a full record, or a record's last chunk
            record = pb.Record()
            record.ParseFromString(b"".join(chunks))
            chunks = []
            if record.WhichOneof("record_type") == "history":
                found.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item})
    return found


def test_wandb_offline(sweep, tmp_path):
    want = expected(sweep)
    for _ in range(2):  # as a user runs it: a process per export
        done = subprocess.run([sys.executable, "-m", "grading.export", str(sweep), "--to", "wandb", "--dir",
                               str(tmp_path / "wb"), "--project", "evals"], cwd=REPO, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    runs = list((tmp_path / "wb" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, "the second export replaced the first offline run"
    history = wandb_history(next(runs[0].glob("run-*.wandb")))
    assert [h["checkpoint_step"] for h in history] == [100, 200, 300] == [h["_step"] for h in history]
    found: dict[str, list] = {}
    for entry in history:
        for key, value in entry.items():
            found.setdefault(key, []).append((entry["checkpoint_step"], value))
    assert_points(found, want)
    assert "wandb sync" in lines[-1]


def test_trackio_local_store(sweep, tmp_path):
    want = expected(sweep)
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio")}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "grading.export", str(sweep), "--to", "trackio", "--dir",
                               str(tmp_path / "trackio"), "--project", "evals"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    read = ("import json, sys; from trackio.sqlite_storage import SQLiteStorage as S; "
            "print(json.dumps({'runs': S.get_runs('evals'), 'logs': S.get_logs('evals', S.get_runs('evals')[0])}))")
    out = json.loads(subprocess.run([sys.executable, "-c", read], env=env, capture_output=True, text=True,
                                    check=True).stdout.splitlines()[-1])
    assert len(out["runs"]) == 1
    found: dict[str, list] = {}
    for entry in out["logs"]:
        for key, value in entry.items():
            if key.startswith(PREFIX):
                found.setdefault(key, []).append((entry["step"], value))
    assert_points(found, want)


def test_a_run_dir_exports_as_one_point_and_a_missing_extra_is_named(sweep, tmp_path, monkeypatch):
    [series] = export_series(sweep / "1")
    assert [p.step for p in series.points] == [100], "a run's step from its model folder's name"
    import grading.trackers as trackers

    monkeypatch.setitem(sys.modules, "mlflow", None)  # as where the extra is not installed
    with pytest.raises(Exception, match=r"install the extra, pip install 'toolsweep\[trackers\]'"):
        list(trackers.export([series], "mlflow", sweep / "1"))
