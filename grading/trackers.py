"""The four trackers `toolsweep export` writes to, each offline and each around its own trap.

Every key is `toolsweep/<setting>/<reading>/<metric>` (CI bounds: `..._low`, `..._high`), so the
points never collide with a training run's own. Points go in ascending step (grading/export.py
orders them), once:

- TensorBoard: its reader purges the points after a step lower than one already read, so each
  series is one event file written in order; a re-export deletes the series' folder first.
- W&B: it silently drops a step lower than one the run has logged, and offline runs cannot be
  resumed. Points carry their own x-axis (`checkpoint_step`, set with define_metric), so adding
  them to a training run that logged later steps loses nothing; a re-export deletes the series'
  earlier offline run folder (its id is derived from the sweep and the series).
- MLflow: the file store errors from 3.13 on and SQLite races under parallel writers, so the
  default is one SQLite file written by this one process; a re-export deletes the series' earlier
  run (found by its tags). Points cannot be deleted from a run: into an existing run, points
  already there at a step are kept and not logged again.
- Trackio: its local store (a SQLite file per project under the Trackio dir); a re-export deletes
  the series' earlier run.

The tracker libraries are the optional extra `toolsweep[trackers]`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from grading.errors import GradingError

@dataclass
class Point:
    step: int
    values: dict[str, float]
    """`setting/reading/metric` (and `..._low`, `..._high` for its 95% CI) -> value."""


@dataclass
class Series:
    """One tracker run: the jobs of one configuration, a point per checkpoint, in step order."""

    name: str
    variant: str
    points: list[Point]
    params: dict[str, str]
    notes: list[str] = field(default_factory=list)
    artifacts: list[Path] = field(default_factory=list)


def slug(name: str) -> str:
    """A name safe as a folder or run id."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "toolsweep"


PREFIX = "toolsweep/"
STEP_METRIC = "checkpoint_step"
"""W&B's x-axis for the exported points (its own `_step` cannot go back below a training run's)."""


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


def _keyed(values: dict[str, float]) -> dict[str, float]:
    return {PREFIX + key: value for key, value in sorted(values.items())}


def series_id(series: Series) -> str:
    """A stable id for a series (the same sweep and configuration give the same id)."""
    digest = hashlib.sha1(f"{series.params.get('toolsweep.source')}\n{series.name}".encode()).hexdigest()
    return f"ts{digest[:12]}"


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

    base = destination or root / "tensorboard"
    for one in series:
        folder = base / f"toolsweep-{slug(one.name)}"
        shutil.rmtree(folder, ignore_errors=True)  # a re-export replaces the series
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
        yield f"tensorboard: {folder} ({len(one.points)} steps)  view: tensorboard --logdir {base}"


# ------------------------------------------------------------------------------------------------ W&B
def wandb(series: list[Series], root: Path, destination: Path | None = None, project: str = "toolsweep",
          run_id: str | None = None, **_: Any) -> Iterator[str]:
    """Offline runs under DIR/wandb/ (DIR default: PATH/wandb); `wandb sync` uploads them later
    (`wandb sync --append` for points added to an existing run with --run-id)."""
    os.environ["WANDB_MODE"] = "offline"
    os.environ.setdefault("WANDB_SILENT", "true")
    wb = _need("wandb")
    base = destination or root / "wandb"
    base.mkdir(parents=True, exist_ok=True)
    for one in series:
        rid = run_id or series_id(one)
        for old in (base / "wandb").glob(f"offline-run-*-{rid}"):
            shutil.rmtree(old)  # a re-export replaces the series' earlier offline run
        run = wb.init(mode="offline", dir=str(base), project=project, name=one.name, id=rid,
                      config=one.params, reinit="create_new",
                      settings=wb.Settings(console="off", x_disable_stats=True, disable_git=True, save_code=False))
        run.define_metric(STEP_METRIC)
        run.define_metric(f"{PREFIX}*", step_metric=STEP_METRIC)
        for point in one.points:
            # no step= on an existing run: its _step is past our checkpoints and W&B would drop them
            run.log({STEP_METRIC: point.step, **_keyed(point.values)}, **({} if run_id else {"step": point.step}))
        if one.artifacts:
            artifact = wb.Artifact(slug(f"toolsweep-{one.name}"), type="evaluation")
            for path in one.artifacts:
                artifact.add_file(str(path))
            run.log_artifact(artifact)
        folder = Path(run.dir).parent
        run.finish()
        yield f"wandb: {folder} ({len(one.points)} steps)  upload: wandb sync {'--append ' if run_id else ''}{folder}"


# --------------------------------------------------------------------------------------------- MLflow
def mlflow(series: list[Series], root: Path, tracking_uri: str | None = None, project: str = "toolsweep",
           run_id: str | None = None, **_: Any) -> Iterator[str]:
    """A run per series in experiment PROJECT of the tracking URI (default sqlite:///PATH/mlflow.db),
    or the points added to your run --run-id."""
    _need("mlflow")
    from mlflow.tracking import MlflowClient

    uri = tracking_uri or f"sqlite:///{(root / 'mlflow.db').resolve()}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(project)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(
        project, artifact_location=(root / "mlflow-artifacts").resolve().as_uri())
    for one in series:
        target = run_id or _fresh_mlflow_run(client, experiment_id, one)
        logged = _logged_points(client, target, one) if run_id else set()
        _mlflow_params(client, target, one)
        _mlflow_metrics(client, target, one, logged)
        for path in one.artifacts:
            client.log_artifact(target, str(path))
        if not run_id:
            client.set_terminated(target)
        yield f"mlflow: run {target} in experiment {project!r} at {uri} ({len(one.points)} steps)"


def _fresh_mlflow_run(client: Any, experiment_id: str, one: Series) -> str:
    source = one.params["toolsweep.source"].replace("'", "")
    found = client.search_runs([experiment_id], filter_string=f"tags.`toolsweep.id` = '{series_id(one)}'")
    for old in found:  # a re-export replaces the series' earlier run
        client.delete_run(old.info.run_id)
    tags = {"toolsweep.id": series_id(one), "toolsweep.source": source, "toolsweep.series": one.name}
    return client.create_run(experiment_id, run_name=one.name, tags=tags).info.run_id


def _logged_points(client: Any, run_id: str, one: Series) -> set[tuple[str, int]]:
    keys = {key for point in one.points for key in _keyed(point.values)}
    return {(key, m.step) for key in keys for m in client.get_metric_history(run_id, key)}


def _mlflow_params(client: Any, run_id: str, one: Series) -> None:
    from mlflow.entities import Param

    have = client.get_run(run_id).data.params
    # MLflow's params cannot change: those an earlier export set are left as they are
    fresh = [Param(f"toolsweep.{k}" if not k.startswith("toolsweep.") else k, v[:6000])
             for k, v in one.params.items()]
    fresh = [p for p in fresh if p.key not in have]
    for start in range(0, len(fresh), 100):
        client.log_batch(run_id, params=fresh[start:start + 100])


def _mlflow_metrics(client: Any, run_id: str, one: Series, logged: set[tuple[str, int]]) -> None:
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    metrics = [Metric(key, value, now, point.step) for point in one.points
               for key, value in _keyed(point.values).items() if (key, point.step) not in logged]
    for start in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[start:start + 1000])


# -------------------------------------------------------------------------------------------- Trackio
def trackio(series: list[Series], root: Path, destination: Path | None = None, project: str = "toolsweep",
            **_: Any) -> Iterator[str]:
    """A run per series in Trackio's local store (DIR default: PATH/trackio; `trackio show` there)."""
    base = (destination or root / "trackio").resolve()
    loaded = sys.modules.get("trackio.utils")
    if loaded is not None and Path(loaded.TRACKIO_DIR).resolve() != base:
        raise GradingError(f"Trackio was already loaded in this process with its store at {loaded.TRACKIO_DIR} "
                           f"(it reads TRACKIO_DIR once): export to {base} from a new process")
    os.environ["TRACKIO_DIR"] = str(base)
    tk = _need("trackio")
    from trackio.sqlite_storage import SQLiteStorage

    for one in series:
        name = slug(one.name)
        if name in SQLiteStorage.get_runs(project):
            SQLiteStorage.delete_run(project, name)  # a re-export replaces the series' earlier run
        tk.init(project=project, name=name, config=dict(one.params), resume="never", embed=False,
                auto_log_cpu=False, auto_log_gpu=False)
        for point in one.points:
            tk.log(_keyed(point.values), step=point.step)
        tk.finish()
        yield f"trackio: run {name} in project {project!r} under {base} ({len(one.points)} steps)"


WRITERS: dict[str, Callable[..., Iterator[str]]] = {
    "tensorboard": tensorboard, "wandb": wandb, "mlflow": mlflow, "trackio": trackio}
