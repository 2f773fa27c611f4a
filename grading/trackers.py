"""The four trackers `toolsweep export` writes to, each offline and each around its own trap.

Every key is `toolsweep/<setting>/<reading>/<metric>` (CI bounds: `..._low`, `..._high`), so the
points never collide with a training run's own. When several series go into one existing run
(--run-id), each key and param carries the series' label (`toolsweep/<label>/...`: its overrides,
made safe as a key), so the series stay apart. Points go in ascending step (grading/export.py
orders them), once. A re-export replaces only what an export wrote, as proven by what it wrote
with it (a marker file naming the series in the folder, the series' id in the run's tags or
config); a folder or run of the same name that it did not write is never deleted:

- TensorBoard: its reader purges the points after a step lower than one already read, so each
  series is one event file written in order, in DIR/toolsweep-<name>/ (the name kept in any
  script; a digest of the whole name added where a character had to go). A re-export replaces
  that folder; a folder of that name without the export's marker stops the export, untouched.
- W&B: it silently drops a step lower than one the run has logged, and offline runs cannot be
  resumed. Points carry their own x-axis (`checkpoint_step`, set with define_metric), so adding
  them to a training run that logged later steps loses nothing. A run per series (id derived
  from the sweep and the series); a re-export replaces the series' earlier offline run folder.
  With --run-id, one new offline run folder with that id holds every series' points (W&B's way
  to add to a run is `wandb sync --append` of such a folder); the run's own folders are never
  touched, and a re-export replaces only its own earlier folder for that run, if not yet synced.
- MLflow: the file store errors from 3.13 on and SQLite races under parallel writers, so the
  default is one SQLite file written by this one process; a re-export deletes the series' earlier
  run (found by its tags). Points cannot be deleted from a run, nor params changed: into an
  existing run, points already there at a step and params already set are kept, and the console
  counts the points written and kept and names the params left as they were.
- Trackio: its local store (a SQLite file per project under the Trackio dir), a run per series
  named as the TensorBoard folder is; a re-export deletes the series' earlier run (found by the
  series' id in its config); a run of that name it did not write stops the export, untouched.

The tracker libraries are the optional extra `toolsweep[trackers]`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from grading.errors import GradingError


@dataclass
class Point:
    step: int
    values: dict[str, float]
    """`setting/reading/metric` (and `..._low`, `..._high` for its 95% CI) -> value; in a sweep over
    several benchmarks each key starts with its benchmark (`<benchmark>/all/official/<metric>`)."""


@dataclass
class Series:
    """One tracker run: the jobs of one configuration, a point per checkpoint, in step order."""

    name: str
    variant: str
    points: list[Point]
    params: dict[str, str]
    notes: list[str] = field(default_factory=list)
    artifacts: list[Path] = field(default_factory=list)


def slug(name: str, limit: int = 80) -> str:
    """A name safe as a folder, run name or key part: letters and digits of any script, `.`, `-`, `_`.
    Where anything had to go (another character, the length), a digest of the whole name is added,
    so different names never share a folder or a run (an ASCII-only slug made `模型甲`, `模型乙` and
    `модель` one run)."""
    safe = re.sub(r"[^\w.-]+", "_", name).strip("_.")[:limit] or "toolsweep"
    return safe if safe == name else f"{safe}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"


PREFIX = "toolsweep/"
STEP_METRIC = "checkpoint_step"
"""W&B's x-axis for the exported points (its own `_step` cannot go back below a training run's)."""
MARKER = "toolsweep-export.json"
"""Written into every folder an export writes: what it names is the only proof a later export
accepts before replacing a folder (a folder that merely has the expected name may be the user's)."""


def export(series: list[Series], tracker: str, root: Path, **options: Any) -> Iterator[str]:
    """Write every series to `tracker`; yields one line per tracker run written."""
    writer = WRITERS[tracker]
    for one in series:
        for note in one.notes:
            yield f"note: {one.name}: {note}"
    yield from writer(series, Path(root), **options)


def _need(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise GradingError(f"exporting needs the tracker libraries ({exc}): install the extra, "
                           "pip install 'toolsweep[trackers]' (make install does)") from None


def missing_libraries(trackers: list[str]) -> list[str]:
    """A problem line per tracker whose library cannot be imported here, found without importing it
    (a sweep asks before its first job, not after its last)."""
    import importlib.util

    missing = []
    for name in trackers:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # ValueError: the name held as None in sys.modules (import blocked)
            found = False
        if not found:
            missing.append(f"export.to=[{name}] needs the {name} package, which is not installed here: install "
                           "the extra, pip install 'toolsweep[trackers]' (make install does), or drop it from export.to")
    return missing


def labels(series: list[Series]) -> list[str | None]:
    """Each series' part of its keys when all of them go into one run: None for a lone series (its keys
    as ever), else its overrides made safe as a key (`base` for none), so no two series share a key."""
    if len(series) == 1:
        return [None]
    found = [slug(one.variant) if one.variant else "base" for one in series]
    if len(set(found)) < len(found):
        raise GradingError(f"series {[one.name for one in series]} would share keys in one run (labels {found}): "
                           "export them without --run-id, a run each")
    return found


def _keyed(values: dict[str, float], label: str | None = None) -> dict[str, float]:
    head = PREFIX + (f"{label}/" if label else "")
    return {head + key: value for key, value in sorted(values.items())}


def _params_keyed(params: dict[str, str], label: str | None = None) -> dict[str, str]:
    """Params as they go into a run that is not the export's own: under `toolsweep.` (and the label)."""
    head = "toolsweep." + (f"{label}." if label else "")
    return {head + key.removeprefix("toolsweep."): value for key, value in params.items()}


def series_id(series: Series) -> str:
    """A stable id for a series (the same sweep and configuration give the same id)."""
    digest = hashlib.sha1(f"{series.params.get('toolsweep.source')}\n{series.name}".encode()).hexdigest()
    return f"ts{digest[:12]}"


def _mark(folder: Path, proof: dict[str, str]) -> None:
    (folder / MARKER).write_text(json.dumps({"written_by": "toolsweep export", **proof}, indent=1) + "\n",
                                 encoding="utf-8")


def _marked(folder: Path, proof: dict[str, str]) -> bool:
    """Whether the export wrote `folder` with this proof (its marker names every item of it)."""
    try:
        found = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(found, dict) and all(found.get(key) == value for key, value in proof.items())


# ------------------------------------------------------------------------------------------- TensorBoard
def tensorboard(series: list[Series], root: Path, destination: Path | None = None, **_: Any) -> Iterator[str]:
    """One event file per series under DIR/toolsweep-<series>/ (DIR: your training run's log dir puts
    the series beside it, as a run of its own on the same step axis)."""
    _need("tensorboard")
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams.summary_v2 import hparams_pb
    from tensorboard.plugins.text.summary_v2 import text_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    base = Path(destination or root / "tensorboard")
    folders = [base / f"toolsweep-{slug(one.name)}" for one in series]
    _refuse_foreign([(f, one) for f, one in zip(folders, series)
                     if f.exists() and not _marked(f, {"series_id": series_id(one)})])
    for one, folder in zip(series, folders):
        shutil.rmtree(folder, ignore_errors=True)  # the export's own earlier folder: a re-export replaces it
        writer = EventFileWriter(str(folder))
        hparams = hparams_pb({key: value for key, value in one.params.items()})
        writer.add_event(Event(wall_time=time.time(), step=one.points[0].step if one.points else 0, summary=hparams))
        for point in one.points:
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)
                                     for tag, value in _keyed(point.values).items()])
            writer.add_event(Event(wall_time=time.time(), step=point.step, summary=summary))
        for artifact in (a for a in one.artifacts if a.suffix == ".md"):
            writer.add_event(Event(wall_time=time.time(), step=one.points[-1].step if one.points else 0,
                                   summary=text_pb(PREFIX + artifact.name, artifact.read_text(encoding="utf-8"))))
        writer.close()
        _mark(folder, {"series_id": series_id(one), "series": one.name})
        yield f"tensorboard: {folder} ({len(one.points)} steps)  view: tensorboard --logdir {base}"


def _refuse_foreign(found: list[tuple[Path, Series]]) -> None:
    if found:
        raise GradingError("; ".join(f"{folder} (series {one.name!r}) exists and was not written by toolsweep export "
                                     f"(it has no {MARKER} naming that series)" for folder, one in found)
                           + ": nothing was written; move it away, or pass another --dir")


# ------------------------------------------------------------------------------------------------ W&B
def wandb(series: list[Series], root: Path, destination: Path | None = None, project: str = "toolsweep",
          run_id: str | None = None, **_: Any) -> Iterator[str]:
    """Offline runs under DIR/wandb/ (DIR default: PATH/wandb); `wandb sync` uploads them later
    (`wandb sync --append` for the points added to your existing run with --run-id)."""
    os.environ["WANDB_MODE"] = "offline"
    os.environ.setdefault("WANDB_SILENT", "true")
    wb = _need("wandb")
    base = Path(destination or root / "wandb")
    base.mkdir(parents=True, exist_ok=True)
    if run_id:
        yield from _wandb_append(wb, series, base, project, run_id)
        return
    for one in series:
        proof = {"series_id": series_id(one)}
        for old in _own_folders(base, proof):
            shutil.rmtree(old)  # a re-export replaces the series' earlier offline run
        run = _wandb_init(wb, base, project, proof["series_id"], one.name, one.params)
        for point in one.points:
            run.log({STEP_METRIC: point.step, **_keyed(point.values)}, step=point.step)
        _wandb_artifact(wb, run, one.name, one.artifacts)
        folder = _wandb_finish(run, {**proof, "series": one.name})
        yield f"wandb: {folder} ({len(one.points)} steps)  upload: wandb sync {folder}"


def _wandb_append(wb: Any, series: list[Series], base: Path, project: str, run_id: str) -> Iterator[str]:
    """Every series into one new offline run folder with your run's id, for `wandb sync --append`: W&B
    cannot resume an offline run in place, and your run's own folders are never touched."""
    proof = {"append_to": run_id, "source": series[0].params.get("toolsweep.source", "")}
    for old in _own_folders(base, proof):
        if any(old.glob("*.wandb.synced")):
            yield (f"wandb: note: {old} (an earlier export into run {run_id}) was synced already: kept; syncing "
                   "this export too adds its points to the run a second time")
        else:
            shutil.rmtree(old)  # the export's own earlier folder for this run, never synced: replaced
    tags = labels(series)
    config: dict[str, str] = {}
    rows: dict[int, dict[str, float]] = {}
    for one, label in zip(series, tags):
        config.update(_params_keyed(one.params, label))
        for point in one.points:
            rows.setdefault(point.step, {}).update(_keyed(point.values, label))
    run = _wandb_init(wb, base, project, run_id, None, config)
    for step in sorted(rows):
        # no step= on an existing run: its _step is past our checkpoints and W&B would drop them
        run.log({STEP_METRIC: step, **rows[step]})
    artifacts = list(dict.fromkeys(path for one in series for path in one.artifacts))
    _wandb_artifact(wb, run, series[0].params.get("toolsweep.series", series[0].name), artifacts)
    folder = _wandb_finish(run, {**proof, "series": json.dumps([one.name for one in series], ensure_ascii=False)})
    keys = "" if len(series) == 1 else f", keys toolsweep/<{'|'.join(str(t) for t in tags)}>/..."
    yield f"wandb: {folder} ({len(series)} series, {len(rows)} steps{keys})  upload: wandb sync --append {folder}"


def _own_folders(base: Path, proof: dict[str, str]) -> list[Path]:
    """The offline run folders an earlier export wrote with this proof (never one that only looks alike)."""
    return [folder for folder in sorted((base / "wandb").glob("offline-run-*"))
            if folder.is_dir() and _marked(folder, proof)]


def _wandb_init(wb: Any, base: Path, project: str, run_id: str, name: str | None, config: dict[str, str]) -> Any:
    run = wb.init(mode="offline", dir=str(base), project=project, name=name, id=run_id, config=config,
                  reinit="create_new",
                  settings=wb.Settings(console="off", x_disable_stats=True, disable_git=True, save_code=False))
    run.define_metric(STEP_METRIC)
    run.define_metric(f"{PREFIX}*", step_metric=STEP_METRIC)
    return run


def _wandb_artifact(wb: Any, run: Any, name: str, paths: list[Path]) -> None:
    if paths:
        artifact = wb.Artifact(slug(f"toolsweep-{name}"), type="evaluation")
        for path in paths:
            artifact.add_file(str(path))
        run.log_artifact(artifact)


def _wandb_finish(run: Any, proof: dict[str, str]) -> Path:
    folder = Path(run.dir).parent
    run.finish()
    _mark(folder, proof)
    return folder


# --------------------------------------------------------------------------------------------- MLflow
def mlflow(series: list[Series], root: Path, tracking_uri: str | None = None, project: str = "toolsweep",
           run_id: str | None = None, **_: Any) -> Iterator[str]:
    """A run per series in experiment PROJECT of the tracking URI (default sqlite:///PATH/mlflow.db),
    or the points added to your run --run-id (several series there: each under its label)."""
    _need("mlflow")
    from mlflow.tracking import MlflowClient

    uri = tracking_uri or f"sqlite:///{(root / 'mlflow.db').resolve()}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(project)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(
        project, artifact_location=(root / "mlflow-artifacts").resolve().as_uri())
    for one, label in zip(series, labels(series) if run_id else [None] * len(series)):
        target = run_id or _fresh_mlflow_run(client, experiment_id, one)
        kept_params = _mlflow_params(client, target, _params_keyed(one.params, label))
        written, kept, differ = _mlflow_metrics(client, target, one, label, existing=bool(run_id))
        for path in one.artifacts:
            client.log_artifact(target, str(path))
        if not run_id:
            client.set_terminated(target)
        said = f"{len(one.points)} steps, {written} points written"
        if kept:
            said += f", {kept} already there at their step, kept"
            said += f" ({differ} with another value)" if differ else ""
        if kept_params:
            said += ("; params already set to other values, left as they were (MLflow cannot change a param): "
                     + ", ".join(kept_params))
        yield f"mlflow: {one.name}: run {target} in experiment {project!r} at {uri}: {said}"


def _fresh_mlflow_run(client: Any, experiment_id: str, one: Series) -> str:
    source = one.params["toolsweep.source"].replace("'", "")
    found = client.search_runs([experiment_id], filter_string=f"tags.`toolsweep.id` = '{series_id(one)}'")
    for old in found:  # a re-export replaces the series' earlier run (its tag proves the export wrote it)
        client.delete_run(old.info.run_id)
    tags = {"toolsweep.id": series_id(one), "toolsweep.source": source, "toolsweep.series": one.name}
    return client.create_run(experiment_id, run_name=one.name, tags=tags).info.run_id


def _mlflow_params(client: Any, run_id: str, params: dict[str, str]) -> list[str]:
    """Logs the params the run has not set yet; returns those it has set to another value (MLflow's params
    cannot change, so those are left as they are, and said)."""
    from mlflow.entities import Param

    have = client.get_run(run_id).data.params
    fresh = {key: value[:6000] for key, value in params.items()}
    differ = [key for key, value in fresh.items() if key in have and have[key] != value]
    batch = [Param(key, value) for key, value in fresh.items() if key not in have]
    for start in range(0, len(batch), 100):
        client.log_batch(run_id, params=batch[start:start + 100])
    return differ


def _mlflow_metrics(client: Any, run_id: str, one: Series, label: str | None,
                    existing: bool) -> tuple[int, int, int]:
    """Logs the points the run has no value for at their step; returns (written, kept, kept with another value)."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    metrics = [Metric(key, value, now, point.step) for point in one.points
               for key, value in _keyed(point.values, label).items()]
    logged = {(m.key, m.step): m.value for key in {m.key for m in metrics}
              for m in client.get_metric_history(run_id, key)} if existing else {}
    fresh = [m for m in metrics if (m.key, m.step) not in logged]
    differ = sum(1 for m in metrics if (m.key, m.step) in logged and logged[m.key, m.step] != m.value)
    for start in range(0, len(fresh), 1000):
        client.log_batch(run_id, metrics=fresh[start:start + 1000])
    return len(fresh), len(metrics) - len(fresh), differ


# -------------------------------------------------------------------------------------------- Trackio
def trackio(series: list[Series], root: Path, destination: Path | None = None, project: str = "toolsweep",
            **_: Any) -> Iterator[str]:
    """A run per series in Trackio's local store (DIR default: PATH/trackio; `trackio show` there)."""
    base = Path(destination or root / "trackio").resolve()
    loaded = sys.modules.get("trackio.utils")
    if loaded is not None and Path(loaded.TRACKIO_DIR).resolve() != base:
        raise GradingError(f"Trackio was already loaded in this process with its store at {loaded.TRACKIO_DIR} "
                           f"(it reads TRACKIO_DIR once): export to {base} from a new process")
    os.environ["TRACKIO_DIR"] = str(base)
    tk = _need("trackio")
    from trackio.sqlite_storage import SQLiteStorage

    runs = [(r["name"], r.get("id"), SQLiteStorage.get_run_config(project, run=r["name"], run_id=r.get("id")) or {})
            for r in SQLiteStorage.get_run_records(project)]
    names = [slug(one.name) for one in series]
    foreign = [f"{name!r} (series {one.name!r})" for name, one in zip(names, series)
               if any(run == name and config.get("toolsweep.id") != series_id(one) for run, _, config in runs)]
    if foreign:
        raise GradingError(f"project {project!r} under {base} has runs not written by toolsweep export named as "
                           f"series to write: {', '.join(foreign)}; nothing was written: pass another --project")
    for one, name in zip(series, names):
        for run, rid, config in runs:
            if config.get("toolsweep.id") == series_id(one):  # the export's own earlier run: replaced
                SQLiteStorage.delete_run(project, run, run_id=rid)
        tk.init(project=project, name=name, config={**one.params, "toolsweep.id": series_id(one)}, resume="never",
                embed=False, auto_log_cpu=False, auto_log_gpu=False)
        for point in one.points:
            tk.log(_keyed(point.values), step=point.step)
        tk.finish()
        yield f"trackio: run {name} in project {project!r} under {base} ({len(one.points)} steps)"


WRITERS: dict[str, Callable[..., Iterator[str]]] = {
    "tensorboard": tensorboard, "wandb": wandb, "mlflow": mlflow, "trackio": trackio}
