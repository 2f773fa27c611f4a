"""Generation store: shards written as they finish, resume, and a cache shared across runs.

Every request gets a key: a hash of the model's weights, the exact prompt tokens, the
sampling parameters, the constraint and the engine and backend versions. After each shard
its rows are written atomically (temporary file, then rename) as a Parquet part in the run
dir, and copied into the cross-run cache. A rerun finds finished shards by key and
generates only what is missing; a rerun with only a grading change generates nothing.

The index. Each folder of parts (a run's parts/, the shared cache) has `index.sqlite` beside
its parts: every cacheable row (finish reason stop/length) by cache key, plus the names of the
parts it holds. A lookup is one indexed query, so it costs ~O(keys asked), not a read of
everything ever cached: 512 keys against 1M cached generations took 2.4-8.9 ms, where reading
every part took 1.6-1.9 s in 512-row parts (what sweeps leave) and 0.14-0.21 s in 100k-row
parts (`scripts/bench.py --only cache`, two runs on a loaded 2-core AMD EPYC with AVX-512).
Why SQLite holding the rows: a pointer (key -> part + row) still decodes a Parquet page per hit,
and one lookup's keys are spread over many parts; key-prefix part files turn each shard into
hundreds of small files and still grow without bound per prefix. SQLite is a B-tree with
transactions in the standard library. The price is a second, uncompressed copy of the rows
(1.8x the Parquet size), and that copy is derived: deleting `index.sqlite` is always safe, the
next open rebuilds it (1M rows: 10-28 s, once).

The Parquet parts stay the truth. A part is written first (temporary name, then rename),
indexed second, with its name, in one transaction. On its first use in a process the index
lists the folder's part names and indexes those it does not know: the part of a writer killed
between the rename and the commit, a cache made before the index (indexed once), a part copied
in by hand. A writer killed inside the transaction leaves a hot journal that SQLite rolls back
on the next open, and its part is then indexed by name like any unknown one.

Concurrency and shared filesystems. Several sweep jobs write one cache at once: a part's name
is the hash of its shard's keys (two jobs share a name only for the same rows), and each job
holds SQLite's write lock only for its insert, waiting up to 120 s for another's. The journal
is the rollback journal, never WAL: WAL's shared-memory file does not work over NFS, while the
rollback journal needs only POSIX (fcntl) locks, which NFSv4 (and NFSv3 with lockd) provide.
Where locks are broken the index can be damaged, but no generation is lost (parts are whole
files renamed into place): damage SQLite reports moves the index aside (`index.sqlite.corrupt`)
and rebuilds it from the parts. On a filesystem known to lack working locks, give each job its
own cache dir. An index that cannot be written (a read-only cache) is built in memory for the
process. Deleting a part does not drop its rows from the index: on NFS a listing can lag
another host's new part, so pruning by listing could drop live rows; to evict, delete the part
and `index.sqlite`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from grading.files import atomic_write, atomic_write_text
from inference.engines import Generation, Request
from inference.errors import ToolsweepError

PART_SCHEMA = pa.schema([("cache_key", pa.string()), ("sample_id", pa.string()), ("output", pa.string()),
                         ("finish_reason", pa.string()), ("output_tokens", pa.int64()),
                         ("error", pa.string()), ("backend", pa.string())])
# finish reasons worth keeping: an engine error may not happen again, so it is retried
_CACHEABLE = ("stop", "length")
_CHUNK = 1 << 20
INDEX_NAME = "index.sqlite"
# PRAGMA user_version of this layout; an index with another value is rebuilt from the parts
_INDEX_VERSION = 1
_BUSY_TIMEOUT_S = 120.0
# bound parameters per query: under the old SQLITE_MAX_VARIABLE_NUMBER default of 999
_BATCH = 900
_CATCH_UP_ROWS = 200_000
_COLUMNS = tuple(PART_SCHEMA.names)
# The key is the table's own B-tree key (WITHOUT ROWID): stored once, found in one descent.
_TABLES = ("CREATE TABLE parts (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, rows INTEGER NOT NULL)",
           "CREATE TABLE generations (cache_key TEXT PRIMARY KEY, sample_id TEXT, output TEXT, finish_reason TEXT, "
           "output_tokens INTEGER, error TEXT, backend TEXT, part INTEGER NOT NULL) WITHOUT ROWID")


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
    are the prompt), so a new request field cannot be left out of the key; `sample_index` 0 is
    left out too, so a first sample is the cached answer of a one-sample run. `chat_json` enters
    only where set (engine=chat: the server renders the chat, so the chat is the prompt, tokens or
    not), so the keys of engines that send tokens are the ones they always had."""
    fields = {k: v for k, v in asdict(request).items() if k not in ("sample_id", "prompt")}
    if fields["sample_index"] == 0:  # a run's first sample keeps the key a one-sample run gives it
        del fields["sample_index"]
    for name in ("chat_json", "grammar"):  # caches written before these fields existed stay valid
        if fields[name] is None:
            del fields[name]
    fields["prompt"] = list(fields.pop("prompt_token_ids"))
    fields["schema"] = fields.pop("schema_json")
    payload = json.dumps({**fields, **context}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


class CacheIndexBusy(ToolsweepError):
    """A generation index stayed locked by another process past the busy timeout."""


@dataclass
class GenerationStore:
    """The run's own parts (for resume) plus the shared cache (for reruns in new run dirs)."""

    run_dir: Path
    cache_dir: Path | None
    backend: str | None = None
    """The structured-output backend recorded with the stored rows (for run.json on a full hit)."""
    _indexes: dict[Path, PartIndex] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def parts_dir(self) -> Path:
        return self.run_dir / "parts"

    def lookup(self, keys: Iterable[str]) -> dict[str, Generation]:
        """Stored generations for the keys that have one (run parts first, then the cache)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Generation] = {}
        for folder in (self.parts_dir, self.cache_dir):
            missing = [k for k in wanted if k not in found]
            if folder is None or not missing or not folder.is_dir():
                continue
            for key, sample_id, output, finish_reason, tokens, error, backend in self._index(folder).get(missing):
                found[key] = Generation(sample_id, output, finish_reason, tokens, error)
                self.backend = backend
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
        self._index(self.parts_dir).add(path.name, pl.from_arrow(table))
        self._share(table, keys)
        return path

    def _index(self, folder: Path) -> PartIndex:
        return self._indexes.setdefault(folder, PartIndex(folder))

    def _share(self, table: pa.Table, keys: list[str]) -> None:
        if self.cache_dir is None:
            return
        keep = pa.array([r in _CACHEABLE for r in table.column("finish_reason").to_pylist()])
        shared = table.filter(keep)
        if shared.num_rows:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            name = hashlib.sha256("".join(keys).encode()).hexdigest()[:24] + ".parquet"
            _atomic_write_parquet(shared, self.cache_dir / name)
            self._index(self.cache_dir).add(name, pl.from_arrow(shared))


class PartIndex:
    """Every cacheable row of one folder of Parquet parts, by cache key, in SQLite beside them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / INDEX_NAME
        # One connection per process and thread (sqlite3 refuses a connection from another thread).
        # One inherited over fork must never be used, nor closed (that could roll back the parent's
        # open transaction), so it stays referenced here, untouched.
        self._connections: dict[tuple[int, int], sqlite3.Connection] = {}

    def connection(self) -> sqlite3.Connection:
        """This process's (and thread's) connection; the first use opens it and indexes the parts it lacks."""
        owner = _owner()
        if owner not in self._connections:
            self._connections[owner] = self._open()
            try:
                self.catch_up()
            except sqlite3.DatabaseError as exc:
                if not _damaged(exc):
                    raise
                self._rebuild(exc)
        return self._connections[owner]

    def get(self, keys: list[str]) -> list[tuple]:
        """The stored rows (PART_SCHEMA's columns) of those keys that have one."""
        try:
            return self._select(keys)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorname not in ("SQLITE_BUSY", "SQLITE_LOCKED"):
                raise
            raise CacheIndexBusy(
                f"the generation index {self.path} stayed locked for {_BUSY_TIMEOUT_S:.0f} s. If no toolsweep job "
                "is writing to it, a stale lock remains (a network filesystem without lock recovery): delete "
                f"{self.path} (it is rebuilt from the parts), or run with engine.cache=false.") from exc
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                raise
            self._rebuild(exc)  # damage met mid-query: rebuild once, then ask again
            return self._select(keys)

    def add(self, name: str, frame: pl.DataFrame) -> bool:
        """Index one part's cacheable rows and its name in one transaction; False where the part was
        known already or the index could not take it (warned: the part is on disk, so the next
        open indexes it)."""
        return self._add_all([(name, frame)]) == 1

    def catch_up(self) -> int:
        """Index the folder's parts the index does not know; how many it added."""
        connection = self.connection()
        known = {name for (name,) in connection.execute("SELECT name FROM parts")}
        added, batch = 0, []
        for path in _part_files(self.folder):
            if path.name not in known and (frame := _read_part(path)) is not None:
                batch.append((path.name, frame))
            # many parts per transaction: each commit journals every page its random keys touched,
            # so indexing 1M legacy rows took 57 s one part per commit, 26 s per 50k rows and
            # 11 s per 200k (the lock is then held ~2 s; other jobs wait, busy timeout 120 s)
            if sum(f.height for _, f in batch) >= _CATCH_UP_ROWS:
                added, batch = added + self._add_all(batch), []
        return added + self._add_all(batch)

    def _add_all(self, parts: list[tuple[str, pl.DataFrame]]) -> int:
        if not parts:
            return 0
        connection, added = self.connection(), 0
        try:
            with _write_transaction(connection):
                for name, frame in parts:
                    # asked under the write lock: another job may have indexed it since we listed
                    if connection.execute("SELECT 1 FROM parts WHERE name = ?", (name,)).fetchone():
                        continue
                    rows = frame.filter(pl.col("finish_reason").is_in(_CACHEABLE)).select(_COLUMNS)
                    part = connection.execute("INSERT INTO parts (name, rows) VALUES (?, ?)",
                                              (name, rows.height)).lastrowid
                    connection.executemany("INSERT OR REPLACE INTO generations VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                           rows.with_columns(part=pl.lit(part)).rows())
                    added += 1
        except sqlite3.DatabaseError as exc:
            if _damaged(exc):
                self._rebuild(exc)  # the rebuild indexes these parts too: they are on disk
                return len(parts)
            if not isinstance(exc, sqlite3.OperationalError):
                raise
            names = ", ".join(name for name, _ in parts[:3]) + (f" and {len(parts) - 3} more" if len(parts) > 3 else "")
            _warn(f"parts {names} in {self.folder} are written but not indexed in {self.path} ({exc}); they stay "
                  "on disk and the next run indexes them. Check the folder is writable and not full.")
            return 0
        return added

    def _select(self, keys: list[str]) -> list[tuple]:
        connection, columns, rows = self.connection(), ", ".join(_COLUMNS), []
        for start in range(0, len(keys), _BATCH):
            batch = keys[start:start + _BATCH]
            query = f"SELECT {columns} FROM generations WHERE cache_key IN ({', '.join('?' * len(batch))})"
            rows += connection.execute(query, batch).fetchall()
        return rows

    def _open(self) -> sqlite3.Connection:
        try:
            return _connect(self.path)
        except sqlite3.OperationalError as exc:  # cannot be created or written: a read-only cache, a full disk
            _warn(f"cannot use the generation index {self.path} ({exc}); indexing the parts in memory for this "
                  "process instead. Make the folder writable to keep the index between runs.")
            return _connect(":memory:")
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                raise
            return self._replace_damaged(exc)

    def _rebuild(self, exc: sqlite3.DatabaseError) -> None:
        self._connections[_owner()] = self._replace_damaged(exc)
        self.catch_up()

    def _replace_damaged(self, exc: sqlite3.DatabaseError) -> sqlite3.Connection:
        aside = self.path.with_name(f"{INDEX_NAME}.corrupt")
        _warn(f"the generation index {self.path} is damaged ({exc}); moved it to {aside.name} and rebuilding it "
              f"from the parts (nothing stored is lost). Delete {aside} once you no longer need it.")
        # the journal goes too: left in place, SQLite would "roll it back" into the new index
        for source, target in ((self.path, aside), (Path(f"{self.path}-journal"), Path(f"{aside}-journal"))):
            with contextlib.suppress(FileNotFoundError):  # another process moved it first
                os.replace(source, target)
        return _connect(self.path)


def _connect(path: Path | str) -> sqlite3.Connection:
    """An index connection in autocommit mode (transactions are explicit), its tables made if new."""
    connection = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
    try:
        # the rollback journal, never WAL: WAL's shared-memory file is unsafe on a network filesystem
        connection.execute("PRAGMA journal_mode=DELETE")
        if connection.execute("PRAGMA user_version").fetchone()[0] != _INDEX_VERSION:
            with _write_transaction(connection):
                # asked again under the write lock: another process may have just made it
                if connection.execute("PRAGMA user_version").fetchone()[0] != _INDEX_VERSION:
                    connection.execute("DROP TABLE IF EXISTS parts")
                    connection.execute("DROP TABLE IF EXISTS generations")
                    for statement in _TABLES:
                        connection.execute(statement)
                    connection.execute(f"PRAGMA user_version = {_INDEX_VERSION}")
    except BaseException:
        connection.close()
        raise
    return connection


@contextlib.contextmanager
def _write_transaction(connection: sqlite3.Connection) -> Iterator[None]:
    # IMMEDIATE takes the write lock up front: a deferred transaction that later upgrades can
    # fail with SQLITE_BUSY at once instead of waiting out the busy timeout
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if connection.in_transaction:
            connection.rollback()
        raise
    connection.execute("COMMIT")


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    # only damage SQLite itself reports: a misuse (sqlite3.ProgrammingError is a DatabaseError
    # too) must surface, not move a sound index aside
    return exc.sqlite_errorname in ("SQLITE_CORRUPT", "SQLITE_NOTADB")


def _owner() -> tuple[int, int]:
    return os.getpid(), threading.get_ident()


def _part_files(folder: Path) -> list[Path]:
    # Temporary files start with "." and are never read: a part is either whole or absent.
    return sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))


def _read_part(path: Path) -> pl.DataFrame | None:
    """One part's stored rows; a file that cannot be read is skipped with a warning
    (a damaged cache entry costs a regeneration, never the run)."""
    try:
        return pl.read_parquet(path, columns=list(PART_SCHEMA.names))
    except Exception as exc:  # noqa: BLE001 - polars and the OS raise many types for a bad file
        _warn(f"skipping unreadable generation file {path} ({type(exc).__name__}: {str(exc)[:200]}); "
              "its rows will be generated again. Delete the file to silence this.")
        return None


def _warn(message: str) -> None:
    print(f"[toolsweep] warning: {message}", file=sys.stderr, flush=True)


def _atomic_write_parquet(table: pa.Table, path: Path) -> None:
    atomic_write(path, lambda tmp: pq.write_table(table, tmp))
