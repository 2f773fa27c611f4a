"""Replay engine: grade outputs produced elsewhere (JSONL or Parquet rows `{sample_id, output}`).

A run of `decoding.samples=k` replays k outputs per record: rows `{sample_id, sample_index,
output}`, `sample_id` the record's id and `sample_index` 0..k-1 (a file without the column is
one output per record, sample 0)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl

from grading.listing import list_first

from inference.engines import EngineContext, Generation, Request
from inference.errors import EngineError
from inference.config import ReplayEngineConfig
from inference.repeats import sample_key

_MAX_LISTED = 20


def read_predictions(path: str | Path, samples: int = 1) -> dict[str, str | None]:
    """The run's sample_id -> output (`sample_index` folded into the id as the run writes it,
    inference.repeats), rejecting files with duplicate samples or without the two columns."""
    path = Path(path).expanduser()
    try:
        frame = (pl.read_parquet(path) if path.suffix == ".parquet"
                 else pl.read_ndjson(path, infer_schema_length=None))
    except Exception as exc:  # noqa: BLE001 - polars raises several types for bad files
        raise EngineError(f"engine.predictions {str(path)!r} is not readable JSONL or Parquet: "
                          f"{type(exc).__name__}: {exc}") from None
    missing = [c for c in ("sample_id", "output") if c not in frame.columns]
    if missing:
        raise EngineError(f"engine.predictions {str(path)!r} lacks columns {missing}; each row "
                          'must be {"sample_id": "r-17666", "output": "..."}')
    ids = _run_ids(frame, samples, path)
    dupes = sorted(k for k, n in Counter(ids).items() if n > 1)
    if dupes:
        raise EngineError(f"engine.predictions has {len(dupes)} duplicate sample ids: "
                          f"{_listing(dupes)}; keep one row per sample.")
    outputs = frame.get_column("output").to_list()
    return {i: (o if o is None or isinstance(o, str) else json.dumps(o)) for i, o in zip(ids, outputs)}


def _run_ids(frame: pl.DataFrame, samples: int, path: Path) -> list[str]:
    records = frame.get_column("sample_id").cast(pl.String).to_list()
    if "sample_index" not in frame.columns:
        return [sample_key(r, 0, samples) for r in records]
    indexes = frame.get_column("sample_index").to_list()
    bad = sorted({i for i in indexes if not isinstance(i, int) or not 0 <= i < samples}, key=str)
    if bad:
        raise EngineError(f"engine.predictions {str(path)!r} has sample_index values {_listing([str(b) for b in bad])} "
                          f"outside 0..{samples - 1}: this run asks for decoding.samples={samples} per record; "
                          "set decoding.samples to the file's number of outputs per record")
    return [sample_key(r, i, samples) for r, i in zip(records, indexes)]


def _listing(items: list[str]) -> str:
    return list_first(items, _MAX_LISTED)


class ReplayEngine:
    """Looks every request up in the predictions file; a missing sample is a `missing` row."""

    backend = "replay"

    def __init__(self, predictions: str | Path, known_ids: list[str], samples: int = 1, partial: bool = False) -> None:
        self._outputs = read_predictions(predictions, samples)
        unknown = sorted(set(self._outputs) - set(known_ids))
        # One shard of a run: the file answers every shard, so ids outside this one are expected.
        if unknown and not partial:
            raise EngineError(f"engine.predictions has {len(unknown)} sample ids that are not in "
                              f"the dataset: {_listing(unknown)}. Check dataset.settings, "
                              "dataset.limit and the id form '{setting}-{entry_id}'.")
        self.missing = [i for i in known_ids if i not in self._outputs]

    @classmethod
    def from_config(cls, engine: "ReplayEngineConfig", context: EngineContext) -> "ReplayEngine":  # noqa: F821
        return cls(engine.predictions, context.sample_ids, context.decoding.samples, context.partial)

    def generate(self, requests: list[Request]) -> list[Generation]:
        """The stored output of each request; absent ones are failures counted as wrong."""
        return [Generation(r.sample_id, self._outputs[r.sample_id], "stop")
                if r.sample_id in self._outputs
                else Generation(r.sample_id, None, "missing", error="missing: no prediction for this sample")
                for r in requests]


CONFIG = ReplayEngineConfig
"""The options this engine reads (conf/engine/replay.yaml is typed by it)."""
