"""The generation store's index: hits, misses, concurrent writers, legacy caches, torn states."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sqlite3
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import inference.cache as cache_module
from inference.cache import INDEX_NAME, PART_SCHEMA, GenerationStore
from inference.engines import Generation

SPAWN = multiprocessing.get_context("spawn")  # fork would copy polars' and pyarrow's thread pools


def _shard(prefix: str, n: int, reason: str = "stop") -> tuple[list[str], list[Generation]]:
    keys = [f"{prefix}-{i}" for i in range(n)]
    return keys, [Generation(f"s-{k}", f"out {k}", reason, 7) for k in keys]


def _indexed(folder: Path) -> tuple[int, int]:
    """(rows, parts) the index file itself holds, read past the store."""
    with contextlib.closing(sqlite3.connect(folder / INDEX_NAME)) as db:
        return (db.execute("SELECT count(*) FROM generations").fetchone()[0],
                db.execute("SELECT count(*) FROM parts").fetchone()[0])


def _write_legacy_part(path: Path, rows: list[dict]) -> None:
    """A part as the store wrote it before the index existed: Parquet only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=PART_SCHEMA), path)


def _row(key: str, reason: str = "stop") -> dict:
    return {"cache_key": key, "sample_id": f"s-{key}", "output": f"out {key}", "finish_reason": reason,
            "output_tokens": 7, "error": None, "backend": "outlines"}


def test_a_written_shard_hits_in_its_run_and_in_a_new_run_and_unknown_or_failed_keys_miss(tmp_path):
    cache = tmp_path / "cache"
    store = GenerationStore(tmp_path / "run_a", cache)
    store.write_part(["ok", "cut", "failed"], [Generation("p-1", "out", "stop", 3), Generation("p-2", "ou", "length", 2),
                                               Generation("p-3", None, "error", None, "EngineError: boom")], "xgrammar")
    expected = {"ok": Generation("p-1", "out", "stop", 3), "cut": Generation("p-2", "ou", "length", 2)}
    assert store.lookup(["ok", "cut", "failed", "unknown"]) == expected, "an error is retried, never stored"
    fresh = GenerationStore(tmp_path / "run_b", cache)
    assert fresh.lookup(["unknown"]) == {} and fresh.backend is None
    assert fresh.lookup(["ok", "cut", "failed"]) == expected and fresh.backend == "xgrammar"
    assert _indexed(cache) == (2, 1) and _indexed(store.parts_dir) == (2, 1)


def test_a_lookup_reads_the_index_not_the_parts(tmp_path):
    cache = tmp_path / "cache"
    keys, generations = _shard("k", 5)
    GenerationStore(tmp_path / "run_a", cache).write_part(keys, generations, "outlines")
    for part in cache.glob("*.parquet"):
        part.unlink()
    assert set(GenerationStore(tmp_path / "run_b", cache).lookup(keys)) == set(keys), "served by index.sqlite alone"
    (cache / INDEX_NAME).unlink()
    assert GenerationStore(tmp_path / "run_c", cache).lookup(keys) == {}, "part and index gone: evicted"


def test_a_store_written_in_one_thread_is_looked_up_from_another(tmp_path, capsys):
    store, found = GenerationStore(tmp_path / "run", tmp_path / "cache"), {}
    keys, generations = _shard("k", 3)
    store.write_part(keys, generations, "outlines")
    reader = threading.Thread(target=lambda: found.update(store.lookup(keys)))
    reader.start()
    reader.join(10)
    assert set(found) == set(keys), "sqlite3 connections are per thread: the store must open one for the reader"
    assert "warning" not in capsys.readouterr().err, "a thread's own connection, not a 'damaged' index rebuilt"


def _write_shards(cache: str, run: str, prefix: str, shards: int, start: multiprocessing.synchronize.Event) -> None:
    start.wait(30)
    store = GenerationStore(Path(run), Path(cache))
    for shard in range(shards):
        store.write_part(*_shard(f"{prefix}{shard}", 25), "outlines")


def test_two_processes_writing_one_cache_at_once_are_both_indexed(tmp_path):
    cache, start = tmp_path / "cache", SPAWN.Event()
    writers = [SPAWN.Process(target=_write_shards, args=(str(cache), str(tmp_path / f"run_{name}"), name, 20, start))
               for name in ("a", "b")]
    for writer in writers:
        writer.start()
    start.set()
    for writer in writers:
        writer.join(60)
    assert [w.exitcode for w in writers] == [0, 0], "a writer failed (see its stderr above)"
    assert _indexed(cache) == (2 * 20 * 25, 40), "all 40 parts indexed by the writers, before any reader opened"
    keys = [k for name in ("a", "b") for shard in range(20) for k in _shard(f"{name}{shard}", 25)[0]]
    assert len(GenerationStore(tmp_path / "reader", cache).lookup(keys)) == len(keys)


def test_a_cache_made_before_the_index_is_indexed_on_first_open_and_only_then(tmp_path, capsys):
    cache = tmp_path / "cache"
    _write_legacy_part(cache / "0a1b.parquet", [_row("old-1"), _row("old-2", "length"), _row("old-3", "error")])
    _write_legacy_part(cache / "ff00.parquet", [_row("old-4")])
    (cache / ".ff01.parquet.99.tmp.parquet").write_bytes(b"half a part")  # a writer killed mid-write
    found = GenerationStore(tmp_path / "run_a", cache).lookup(["old-1", "old-2", "old-3", "old-4"])
    assert set(found) == {"old-1", "old-2", "old-4"} and _indexed(cache) == (3, 2)
    (cache / "0a1b.parquet").write_bytes(b"damaged after indexing")
    assert set(GenerationStore(tmp_path / "run_b", cache).lookup(["old-1", "old-4"])) == {"old-1", "old-4"}
    assert "warning" not in capsys.readouterr().err, "a known part is never read again, a temporary file never"


@contextlib.contextmanager
def _dying_transaction(connection: sqlite3.Connection):
    """The real transaction, the process killed after its inserts and before its commit."""
    with _REAL_TRANSACTION(connection):
        before = connection.total_changes
        yield
        if connection.total_changes > before:
            os.kill(os.getpid(), signal.SIGKILL)


_REAL_TRANSACTION = cache_module._write_transaction


def _killed_writer(run: str, cache: str, fault: str) -> None:
    if fault == "before_indexing":
        cache_module.PartIndex.add = lambda *_: os.kill(os.getpid(), signal.SIGKILL)
    else:
        cache_module._write_transaction = _dying_transaction
    GenerationStore(Path(run), Path(cache)).write_part(*_shard("torn", 3), "outlines")


@pytest.mark.parametrize("fault", [
    pytest.param("before_indexing", id="killed between the part's rename and its index transaction"),
    pytest.param("inside_transaction", id="killed inside the index transaction: a hot journal is left"),
])
def test_a_run_killed_while_indexing_resumes_from_its_written_part(tmp_path, fault):
    run, cache = tmp_path / "run", tmp_path / "cache"
    writer = SPAWN.Process(target=_killed_writer, args=(str(run), str(cache), fault))
    writer.start()
    writer.join(60)
    assert writer.exitcode == -signal.SIGKILL
    assert (run / "parts" / "part-00000.parquet").is_file() and not cache.exists()
    assert (run / "parts" / f"{INDEX_NAME}-journal").exists() == (fault == "inside_transaction")
    keys = _shard("torn", 3)[0]
    assert set(GenerationStore(run, cache).lookup(keys)) == set(keys)
    assert _indexed(run / "parts") == (3, 1)


def _zero_after(keep: int):
    return lambda path: path.write_bytes(path.read_bytes()[:keep] + b"\0" * (path.stat().st_size - keep))


@pytest.mark.parametrize("damage", [
    pytest.param(lambda path: path.write_bytes(b"not a database at all"), id="overwritten: not a database"),
    pytest.param(_zero_after(100), id="header kept, schema page zeroed: malformed at open"),
    pytest.param(_zero_after(4096), id="schema page kept, tables zeroed: malformed at the first query"),
])
def test_a_damaged_index_is_moved_aside_and_rebuilt_from_the_parts(tmp_path, capsys, damage):
    cache = tmp_path / "cache"
    GenerationStore(tmp_path / "run_a", cache).write_part(*_shard("a", 40), "outlines")
    damage(cache / INDEX_NAME)
    GenerationStore(tmp_path / "run_b", cache).write_part(*_shard("b", 5), "outlines")  # a write meets it first
    keys = _shard("a", 40)[0] + _shard("b", 5)[0]
    assert set(GenerationStore(tmp_path / "run_c", cache).lookup(keys)) == set(keys)
    assert "is damaged" in capsys.readouterr().err and (cache / f"{INDEX_NAME}.corrupt").is_file()
    assert _indexed(cache) == (45, 2)


def test_an_index_that_cannot_be_opened_is_built_in_memory(tmp_path, capsys):
    cache = tmp_path / "cache"
    _write_legacy_part(cache / "0a1b.parquet", [_row("old-1")])
    (cache / INDEX_NAME).mkdir()  # stands in for a read-only cache: SQLite cannot open the file
    assert set(GenerationStore(tmp_path / "run", cache).lookup(["old-1", "old-2"])) == {"old-1"}
    assert "indexing the parts in memory" in capsys.readouterr().err
