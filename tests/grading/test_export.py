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
from typing import Any, Iterator

import polars as pl
import pytest

from grading.errors import GradingError
from grading.export import export_series
from grading.trackers import PREFIX, Point, Series, export
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
    # the sweep exports itself when it ends (test_a_sweep_exports_at_its_end_from_config)
    done = run_sweep(root / "sweep", ["engine=replay", "engine.predictions=${model.path}/preds.jsonl",
                                      f"model.path={paths}", "dataset.settings=[p]", "export.to=[tensorboard,mlflow]",
                                      f"export.tensorboard.dir={root / 'tb-at-end'}",
                                      f"export.mlflow.tracking_uri=sqlite:///{root / 'mlflow-at-end.db'}",
                                      "export.mlflow.project=overnight"], timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (root / "sweep.out").write_text(done.stdout)
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


def test_a_sweep_exports_at_its_end_from_config(sweep):
    """export.to=[tensorboard,mlflow] with each one's destination: the sweep's points are in both
    trackers when it ends, as `toolsweep export` writes them, without a second command."""
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    [run] = (sweep.parent / "tb-at-end").iterdir()
    reader = EventAccumulator(str(run), size_guidance={"scalars": 0})
    reader.Reload()
    assert_points({tag: [(e.step, e.value) for e in reader.Scalars(tag)] for tag in reader.Tags()["scalars"]},
                  expected(sweep))
    [series] = export_series(sweep)
    assert "export." not in series.params["toolsweep.overrides"], "where it is exported is no configuration"
    out = (sweep.parent / "sweep.out").read_text()
    assert f"[toolsweep] export: tensorboard: {run} (3 steps)" in out
    client = MlflowClient(tracking_uri=f"sqlite:///{sweep.parent / 'mlflow-at-end.db'}")
    [mlflow_run] = client.search_runs([client.get_experiment_by_name("overnight").experiment_id])
    assert_points({key: [(m.step, m.value) for m in client.get_metric_history(mlflow_run.info.run_id, key)]
                   for key in mlflow_run.data.metrics}, expected(sweep))
    assert "[toolsweep] export: mlflow: " in out and out.index("export: tensorboard") < out.index("export: mlflow")


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


def wandb_records(path: Path) -> Iterator[Any]:
    """The records of an offline run's .wandb file, decoded with W&B's own record schema (wandb 0.31 ships
    no Python reader of these files; the framing is LevelDB's log format: 32 KiB blocks of chunks with a
    7-byte header)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    pos, chunks = 7, []
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
            yield record


def wandb_history(path: Path) -> list[dict]:
    """The history records of an offline run's .wandb file."""
    return [{(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item}
            for record in wandb_records(path) if record.WhichOneof("record_type") == "history"]


def wandb_run_facts(path: Path) -> tuple[set[str], set[str]]:
    """(the config keys, the display names) an offline run's .wandb file sets: what `wandb sync --append`
    would change on the run it is added to."""
    keys, names = set(), set()
    for record in wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "config":
            keys |= {i.key or "/".join(i.nested_key) for i in record.config.update}
        elif kind == "run":
            keys |= {i.key or "/".join(i.nested_key) for i in record.run.config.update}
            names |= {record.run.display_name} - {""}
    return keys, names


def wandb_step_metrics(path: Path) -> dict[str, str]:
    """The x-axis each metric (or glob) is plotted against, as the offline run's define_metric records set it."""
    return {(r.metric.glob_name or r.metric.name): r.metric.step_metric for r in wandb_records(path)
            if r.WhichOneof("record_type") == "metric" and r.metric.step_metric}


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


# ------------------------------------------------- several series into one run, names no ASCII slug keeps apart
ACC = "all/official/tool_acc"
TEMPERATURES = {"0": {100: 0.1, 200: 0.2, 300: 0.3}, "0.5": {100: 0.5, 200: 0.6, 300: 0.7}}
"""Two configurations of one sweep: the same keys, their own values (each step's value tells them apart)."""
UNICODE = {"模型甲": 0.1, "模型乙": 0.2, "модель": 0.3, "ñame": 0.4}
"""Series names an ASCII-only slug maps to the same folder or run name ('toolsweep' thrice, 'ame')."""


def made_series(source: str, names: dict[str, dict[int, float]], params: dict[str, str] | None = None) -> list[Series]:
    """Series as grading.export makes them: name -> {step: tool_acc}."""
    return [Series(name=f"sweep [{name}]" if "=" in name else name, variant=name,
                   points=[Point(step, {ACC: value, f"{ACC}_low": value - 0.05})
                           for step, value in sorted(curve.items())],
                   params={"toolsweep.source": source, "toolsweep.series": "sweep", "toolsweep.overrides": name,
                           "engine": "replay", **(params or {})}) for name, curve in names.items()]


def two_configurations(source: str, commit: str = "abc") -> list[Series]:
    return made_series(source, {f"decoding.temperature={t}": curve for t, curve in TEMPERATURES.items()},
                       {"commit": commit})


def unicode_series(source: str) -> list[Series]:
    return made_series(source, {name: {100: value, 200: value + 0.5} for name, value in UNICODE.items()})


def curves(found: dict[str, list[tuple[int, float]]], suffix: str = ACC) -> list[list[tuple[int, float]]]:
    """The (step, value) lists of every key ending in `suffix`, rounded, sorted: which key holds which
    series is the tracker's business, that each series' curve is there whole is the test's."""
    return sorted([(step, round(value, 6)) for step, value in points]
                  for key, points in found.items() if key.endswith("/" + suffix))


def export_in_child(call: str, env: dict[str, str] | None = None) -> list[str]:
    """`call` (an export of this module's made series) in a new process, as W&B and Trackio need; its lines."""
    script = ("from pathlib import Path; from grading.trackers import export; "
              "from tests.grading.test_export import two_configurations, unicode_series; "
              f"[print(line) for line in {call}]")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def user_wandb_run(base: Path, run_id: str) -> Path:
    """A training run's offline folder, written by wandb itself: its own keys, config and steps."""
    script = ("import sys, wandb; run = wandb.init(mode='offline', dir=sys.argv[1], project='evals', id=sys.argv[2], "
              "config={'lr': 0.1, 'engine': 'mine'}, settings=wandb.Settings(console='off', x_disable_stats=True, "
              "disable_git=True, save_code=False)); "
              "[run.log({'train/loss': 2.0 - s / 500}, step=s) for s in range(0, 501, 50)]; run.finish()")
    base.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-c", script, str(base), run_id], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "WANDB_SILENT": "true"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    [folder] = (base / "wandb").glob(f"offline-run-*-{run_id}")
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def synced_folders(lines: list[str]) -> list[Path]:
    """The folders the printed `wandb sync --append FOLDER` lines name."""
    found = [Path(line.split("wandb sync --append ", 1)[1].strip()) for line in lines if "wandb sync --append " in line]
    assert found, lines
    return found


def history_points(folder: Path) -> dict[str, list[tuple[int, float]]]:
    found: dict[str, list] = {}
    for entry in wandb_history(next(folder.glob("run-*.wandb"))):
        for key, value in entry.items():
            if key.startswith(PREFIX):
                found.setdefault(key, []).append((entry["checkpoint_step"], value))
    return found


def test_wandb_run_id_appends_beside_the_users_run_and_never_touches_it(sweep, tmp_path):
    base = tmp_path / "wb"
    user = user_wandb_run(base, "train1")
    before = snapshot(user)
    assert any(name.endswith(".wandb") for name in before)
    want = expected(sweep)
    for _ in range(2):  # one series, as a user runs it; the second export replaces the first's own folder
        done = subprocess.run([sys.executable, "-m", "grading.export", str(sweep), "--to", "wandb", "--dir", str(base),
                               "--project", "evals", "--run-id", "train1"], cwd=REPO, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert snapshot(user) == before, "the user's own run was changed"
    [appended] = synced_folders(done.stdout.splitlines())
    assert appended.is_dir() and appended != user and appended.name.startswith("offline-run-")
    assert next(appended.glob("run-*.wandb")).name == "run-train1.wandb", "the same run id, for wandb sync --append"
    assert sorted(p.name for p in (base / "wandb").glob("offline-run-*")) == sorted([user.name, appended.name])
    assert_points(history_points(appended), want)
    keys, names = wandb_run_facts(next(appended.glob("run-*.wandb")))
    assert names == set(), "the training run keeps its name"
    # on the run they join, the points are plotted at their checkpoint step, not at the run's own _step
    assert wandb_step_metrics(next(appended.glob("run-*.wandb"))) == {PREFIX + "*": "checkpoint_step"}
    assert {k for k in keys if not k.startswith("_")} and all(k.startswith(("toolsweep.", "_")) for k in keys), keys
    # once synced, the folder is kept: a new one, and the console says syncing it adds the points again
    (appended / "run-train1.wandb.synced").write_text("")
    done = subprocess.run([sys.executable, "-m", "grading.export", str(sweep), "--to", "wandb", "--dir", str(base),
                           "--project", "evals", "--run-id", "train1"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert appended.is_dir() and f"{appended} (an earlier export into run train1) was synced already" in done.stdout
    [again] = synced_folders(done.stdout.splitlines())
    assert again.is_dir() and again not in (appended, user) and snapshot(user) == before
    # two series into the same run: each keeps its own curve, the user's run stays as it was
    lines = export_in_child(f"export(two_configurations('/sweeps/a'), 'wandb', '{tmp_path}', "
                            f"destination=Path('{base}'), project='evals', run_id='train1')",
                            env={**os.environ, "WANDB_SILENT": "true"})
    assert snapshot(user) == before, "the user's own run was changed"
    folders = synced_folders(lines)
    assert all(folder.is_dir() for folder in folders), lines
    found: dict[str, list] = {}
    for folder in folders:
        found.update(history_points(folder))
    assert curves(found) == sorted(sorted(curve.items()) for curve in TEMPERATURES.values())


def test_wandb_reexport_keeps_a_folder_it_did_not_write(sweep, tmp_path):
    """A folder named like the series' own offline run, but not written by the export, is left alone."""
    base = tmp_path / "wb"
    done = subprocess.run([sys.executable, "-m", "grading.export", str(sweep), "--to", "wandb", "--dir", str(base)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    [ours] = (base / "wandb").glob("offline-run-*")
    lookalike = ours.with_name(f"offline-run-19990101_000000-{ours.name.rsplit('-', 1)[1]}")  # the same run id
    lookalike.mkdir()
    (lookalike / "notes.txt").write_text("mine")
    done = subprocess.run([sys.executable, "-m", "grading.export", str(sweep), "--to", "wandb", "--dir", str(base)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (lookalike / "notes.txt").read_text() == "mine"
    assert not ours.exists(), "the export's own earlier run is replaced"
    assert len(list((base / "wandb").glob("offline-run-*"))) == 2


def test_mlflow_two_series_into_one_existing_run_stay_apart(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("evals")
    training = client.create_run(experiment, run_name="training").info.run_id
    client.log_param(training, "commit", "training-commit")
    first = list(export(two_configurations("/sweeps/a"), "mlflow", tmp_path, tracking_uri=uri, project="evals",
                        run_id=training))
    again = list(export(two_configurations("/sweeps/a"), "mlflow", tmp_path, tracking_uri=uri, project="evals",
                        run_id=training))
    data = client.get_run(training).data
    found = {key: [(m.step, m.value) for m in client.get_metric_history(training, key)] for key in data.metrics}
    assert curves(found) == sorted(sorted(curve.items()) for curve in TEMPERATURES.values()), "each series whole, once"
    temperatures = sorted(value for key, value in data.params.items() if key.endswith(".overrides"))
    assert temperatures == sorted(f"decoding.temperature={t}" for t in TEMPERATURES), data.params
    assert data.params["commit"] == "training-commit", "the training run's own params are kept"
    # the console says what was written and what was already there
    assert [line.split(": ", 1)[0] for line in first] == ["mlflow"] * 2
    assert all(" 6 points written" in line and "kept" not in line for line in first), first
    assert all(" 0 points written" in line and "6 already there at their step, kept" in line for line in again), again
    # a param that changed cannot be changed in MLflow: said, not dropped silently
    changed = list(export(two_configurations("/sweeps/a", commit="def"), "mlflow", tmp_path, tracking_uri=uri,
                          project="evals", run_id=training))
    assert all("commit" in line and "left as they were" in line for line in changed), changed


def test_unicode_series_names_stay_apart_in_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    for _ in range(2):
        list(export(unicode_series("/sweeps/u"), "tensorboard", tmp_path, destination=logdir))
    assert sorted(p.name for p in logdir.iterdir()) == sorted(f"toolsweep-{name}" for name in UNICODE)
    for name, value in UNICODE.items():
        reader = EventAccumulator(str(logdir / f"toolsweep-{name}"), size_guidance={"scalars": 0})
        reader.Reload()
        got = [(e.step, round(e.value, 6)) for e in reader.Scalars(PREFIX + ACC)]
        assert got == [(100, value), (200, round(value + 0.5, 6))], name


def test_tensorboard_keeps_a_folder_it_did_not_write(tmp_path):
    logdir = tmp_path / "tb"
    (logdir / "toolsweep-baseline").mkdir(parents=True)
    (logdir / "toolsweep-baseline" / "notes.txt").write_text("mine")
    with pytest.raises(GradingError, match="toolsweep-baseline.*not written by toolsweep export"):
        list(export(made_series("/sweeps/u", {"baseline": {100: 0.1}}), "tensorboard", tmp_path, destination=logdir))
    assert (logdir / "toolsweep-baseline" / "notes.txt").read_text() == "mine"


def test_unicode_series_names_stay_apart_in_trackio(tmp_path):
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio")}
    for _ in range(2):
        export_in_child(f"export(unicode_series('/sweeps/u'), 'trackio', '{tmp_path}', "
                        f"destination=Path('{tmp_path / 'trackio'}'), project='evals')", env=env)
    read = ("import json; from trackio.sqlite_storage import SQLiteStorage as S; "
            "print(json.dumps({run: S.get_logs('evals', run) for run in S.get_runs('evals')}))")
    out = json.loads(subprocess.run([sys.executable, "-c", read], env=env, capture_output=True, text=True,
                                    check=True).stdout.splitlines()[-1])
    assert sorted(out) == sorted(UNICODE), "one run per series, by its own name, the first export's replaced"
    for name, value in UNICODE.items():
        got = [(e["step"], round(e[PREFIX + ACC], 6)) for e in out[name]]
        assert got == [(100, value), (200, round(value + 0.5, 6))], name


def test_trackio_keeps_a_run_it_did_not_write(tmp_path):
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio")}
    mine = ("import trackio; trackio.init(project='evals', name='baseline', config={'lr': 0.1}, embed=False, "
            "auto_log_cpu=False, auto_log_gpu=False); trackio.log({'loss': 1.0}, step=0); trackio.finish()")
    subprocess.run([sys.executable, "-c", mine], env=env, capture_output=True, text=True, check=True, timeout=300)
    script = ("from pathlib import Path; from grading.trackers import export; "
              "from tests.grading.test_export import made_series; "
              f"[print(line) for line in export(made_series('/sweeps/u', {{'baseline': {{100: 0.1}}}}), 'trackio', "
              f"'{tmp_path}', destination=Path('{tmp_path / 'trackio'}'), project='evals')]")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode != 0 and "'baseline'" in done.stderr and "not written by toolsweep export" in done.stderr
    read = ("import json; from trackio.sqlite_storage import SQLiteStorage as S; "
            "print(json.dumps([S.get_runs('evals'), S.get_logs('evals', 'baseline')]))")
    runs, logs = json.loads(subprocess.run([sys.executable, "-c", read], env=env, capture_output=True, text=True,
                                           check=True).stdout.splitlines()[-1])
    assert runs == ["baseline"] and [e["loss"] for e in logs] == [1.0], "the user's run is as it was"


def test_trackio_existing_project_keeps_its_runs_and_gets_the_points_once(sweep, tmp_path):
    """A project that already holds the user's training run: the export adds its run beside it, a re-export
    adds nothing twice, and the training run's own history is as it was (read with Trackio's own reader)."""
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio")}
    mine = ("import trackio; trackio.init(project='evals', name='training', config={'lr': 0.1}, embed=False, "
            "auto_log_cpu=False, auto_log_gpu=False); [trackio.log({'train/loss': 2.0 - s / 500}, step=s) "
            "for s in range(0, 501, 50)]; trackio.finish()")
    subprocess.run([sys.executable, "-c", mine], env=env, capture_output=True, text=True, check=True, timeout=300)
    read = ("import json; from trackio.sqlite_storage import SQLiteStorage as S; "
            "print(json.dumps({run: S.get_logs('evals', run) for run in S.get_runs('evals')}))")

    def runs() -> dict[str, list[dict]]:
        return json.loads(subprocess.run([sys.executable, "-c", read], env=env, capture_output=True, text=True,
                                         check=True).stdout.splitlines()[-1])

    before = runs()["training"]
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "grading.export", str(sweep), "--to", "trackio", "--dir",
                               str(tmp_path / "trackio"), "--project", "evals"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    found = runs()
    assert len(found) == 2 and found["training"] == before, "the training run is as it was"
    [ours] = [name for name in found if name != "training"]
    points: dict[str, list] = {}
    for entry in found[ours]:
        for key, value in entry.items():
            if key.startswith(PREFIX):
                points.setdefault(key, []).append((entry["step"], value))
    assert_points(points, expected(sweep))


def test_a_tracker_named_or_installed_wrongly_is_said_before_the_sweep(tmp_path, monkeypatch):
    from grading.trackers import missing_libraries
    from inference.config import export_problems

    assert export_problems(["tensorboard", "mlflow"]) == [] and missing_libraries(["tensorboard", "mlflow"]) == []
    [unknown] = export_problems(["tensorbord"])
    assert "export.to must be a subset of ['tensorboard', 'wandb', 'mlflow', 'trackio']" in unknown and "tensorbord" in unknown
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as where the extra is not installed
    [missing] = missing_libraries(["tensorboard", "mlflow"])
    assert "the mlflow package" in missing and "pip install 'toolsweep[trackers]'" in missing
    # the command: exit 2 before any job starts, the package and the extra named (a sitecustomize hides it)
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['tensorboard'] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hide), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "inference.cli", "-m", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                           "engine=replay", "engine.predictions=none.jsonl", "model.path=a,b",
                           "export.to=[tensorboard]"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "no job was started" in done.stderr and "export.to=[tensorboard] needs the tensorboard package" in done.stderr
    assert "toolsweep[trackers]" in done.stderr
    assert not (tmp_path / "sweep" / "0").exists()
