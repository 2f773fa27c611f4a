"""Generation store: shards written as they finish, resume, and a cache shared across runs.

Every request gets a key: a hash of the model's weights, the exact prompt tokens, the
sampling parameters, the constraint and the engine and backend versions. After each shard
its rows are written atomically (temporary file, then rename) as a Parquet part in the run
dir, and copied into the cross-run cache. A rerun finds finished shards by key and
generates only what is missing; a rerun with only a grading change generates nothing.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from grading.files import atomic_write, atomic_write_text
from inference.engines import Generation, Request

PART_SCHEMA = pa.schema([("cache_key", pa.string()), ("sample_id", pa.string()), ("output", pa.string()),
                         ("finish_reason", pa.string()), ("output_tokens", pa.int64()),
                         ("error", pa.string()), ("backend", pa.string())])
# finish reasons worth keeping: an engine error may not happen again, so it is retried
_CACHEABLE = ("stop", "length")
_CHUNK = 1 << 20


def file_digest(path: Path, memo_dir: Path | None) -> str:
    """sha256 of a file's bytes, remembered by (path, size, mtime) so a checkpoint is read once."""
    stat = path.stat()
    memo = None
    if memo_dir is not None:
        ident = f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
        memo = memo_dir / hashlib.sha256(ident.encode()).hexdigest()
        if memo.is_file():
            return memo.read_text().strip()
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    value = digest.hexdigest()
    if memo is not None:
        memo.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(memo, value)
    return value


def model_digest(folder: Path, memo_dir: Path | None = None) -> str:
    """Content hash of a model (or adapter) folder: every file's bytes, not just names and sizes.

    Checkpoints of one training run share file names, sizes and config, so anything short of
    the weights' content would let one checkpoint reuse another's generations.
    """
    digest = hashlib.sha256()
    for f in sorted(p for p in folder.iterdir() if p.is_file()):
        digest.update(f"{f.name}:{file_digest(f, memo_dir)}\n".encode())
    return digest.hexdigest()


def request_key(request: Request, context: dict[str, Any]) -> str:
    """The cache key of one request under a run context (model, sampling, engine, versions).

    Every field of the request enters it but the sample id and the prompt text (the token ids
    are the prompt), so a new request field cannot be left out of the key."""
    fields = {k: v for k, v in asdict(request).items() if k not in ("sample_id", "prompt")}
    fields["prompt"] = list(fields.pop("prompt_token_ids"))
    fields["schema"] = fields.pop("schema_json")
    payload = json.dumps({**fields, **context}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass
class GenerationStore:
    """The run's own parts (for resume) plus the shared cache (for reruns in new run dirs)."""

    run_dir: Path
    cache_dir: Path | None
    backend: str | None = None
    """The structured-output backend recorded with the stored rows (for run.json on a full hit)."""

    @property
    def parts_dir(self) -> Path:
        return self.run_dir / "parts"

    def lookup(self, keys: Iterable[str]) -> dict[str, Generation]:
        """Stored generations for the keys that have one (run parts first, then the cache)."""
        wanted = set(keys)
        found: dict[str, Generation] = {}
        for folder in (self.parts_dir, self.cache_dir):
            if folder is None or not folder.is_dir() or not wanted - set(found):
                continue
            for row in _read_parts(folder, wanted - set(found)):
                found[row["cache_key"]] = Generation(row["sample_id"], row["output"], row["finish_reason"],
                                                     row["output_tokens"], row["error"])
                self.backend = row["backend"]
        return found

    def write_part(self, keys: list[str], generations: list[Generation], backend: str) -> Path:
        """Write one finished shard atomically, record it in the manifest, copy it to the cache."""
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        index = len(list(self.parts_dir.glob("part-*.parquet")))
        path = self.parts_dir / f"part-{index:05d}.parquet"
        table = pa.Table.from_pylist([
            {"cache_key": k, "sample_id": g.sample_id, "output": g.output, "finish_reason": g.finish_reason,
             "output_tokens": g.output_tokens, "error": g.error, "backend": backend}
            for k, g in zip(keys, generations)], schema=PART_SCHEMA)
        _atomic_write_parquet(table, path)
        with open(self.parts_dir / "manifest.jsonl", "a", encoding="utf-8") as manifest:
            manifest.write(json.dumps({"part": path.name, "rows": table.num_rows, "written": time.time()}) + "\n")
        self._share(table, keys)
        return path

    def _share(self, table: pa.Table, keys: list[str]) -> None:
        if self.cache_dir is None:
            return
        keep = pa.array([r in _CACHEABLE for r in table.column("finish_reason").to_pylist()])
        shared = table.filter(keep)
        if shared.num_rows:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            name = hashlib.sha256("".join(keys).encode()).hexdigest()[:24]
            _atomic_write_parquet(shared, self.cache_dir / f"{name}.parquet")


def _read_parts(folder: Path, wanted: set[str]) -> list[dict[str, Any]]:
    # Temporary files start with "." and are never read: a part is either whole or absent.
    files = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))
    frames = [f for f in (_read_part(p, wanted) for p in files) if f is not None and f.height]
    if not frames:
        return []
    return pl.concat(frames).unique("cache_key", keep="last", maintain_order=True).to_dicts()


def _read_part(path: Path, wanted: set[str]) -> pl.DataFrame | None:
    """One part's stored rows for `wanted`; a file that cannot be read is skipped with a warning
    (a damaged cache entry costs a regeneration, never the run)."""
    try:
        frame = pl.read_parquet(path, columns=list(PART_SCHEMA.names))
    except Exception as exc:  # noqa: BLE001 - polars and the OS raise many types for a bad file
        print(f"[toolsweep] warning: skipping unreadable generation file {path} ({type(exc).__name__}: "
              f"{str(exc)[:200]}); its rows will be generated again. Delete the file to silence this.",
              file=sys.stderr, flush=True)
        return None
    return frame.filter(pl.col("cache_key").is_in(list(wanted)) & pl.col("finish_reason").is_in(_CACHEABLE))


def _atomic_write_parquet(table: pa.Table, path: Path) -> None:
    atomic_write(path, lambda tmp: pq.write_table(table, tmp))
