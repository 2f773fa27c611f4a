"""`toolsweep merge SWEEP_DIR`: a sharded run's parts (inference/shards.py) joined into one run.

When every job of a sweep is a part of one run (`-m dataset.shards=N dataset.shard=range(N)`),
the sweep's end (or this command) writes SWEEP_DIR/merged: the parts' samples in the unsharded
run's order (the benchmark's files are read again for it), re-graded, so its samples.parquet,
metrics.parquet and report.html are those of the unsharded run. The side tables the parts list in
run.json (`side_tables`, declared by the benchmark's solvers: an agent's messages, a judge's
answers) are joined the same way, each sample's rows in the order the table declares; run.json
sums the parts' generation counts. Parts written before run.json listed them: the tables their
benchmark's solvers declare now, where the parts hold them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import polars as pl

from grading.errors import GradingError
from grading.files import atomic_write
from grading.sweep import Job, find_jobs
from grading.views import SIDE_TABLES, SideTable, side_tables_in
from inference.errors import DatasetError, ToolsweepError

MERGED = "merged"
"""The merged run's folder in the sweep dir."""


def shard_jobs(sweep_dir: Path) -> list[Job] | None:
    """The sweep's jobs when they are exactly the parts of one sharded run (each job's overrides
    the same but for dataset.shard, one job per part); None for any other sweep."""
    jobs = find_jobs(sweep_dir)
    parts = [_shard_override(job.overrides) for job in jobs]
    if not jobs or any(p is None for p in parts):
        return None
    rest = {tuple(o for o in job.overrides if not o.startswith("dataset.shard=")) for job in jobs}
    return jobs if len(rest) == 1 and sorted(parts) == list(range(len(jobs))) else None


def _shard_override(overrides: tuple[str, ...]) -> int | None:
    values = [o.split("=", 1)[1] for o in overrides if o.startswith("dataset.shard=")]
    return int(values[0]) if len(values) == 1 and values[0].isdigit() else None


def finished_parts(sweep_dir: Path) -> list[Job]:
    """The parts of a sharded run, every one complete; an error says what is not."""
    jobs = shard_jobs(sweep_dir)
    if jobs is None:
        raise DatasetError(f"{sweep_dir} is not a sharded run: its jobs must differ only in dataset.shard, one job "
                           "per part (run it as -m dataset.shards=N dataset.shard=range(N))")
    unfinished = [f"{job.number} ({job.status}: {job.reason})" for job in jobs if job.status != "complete"]
    if unfinished:
        raise DatasetError(f"{sweep_dir}: shards {unfinished} are not complete; rerun the same sweep with "
                           f"hydra.sweep.dir={sweep_dir} (finished shards are kept, the others resume)")
    return jobs


def merge_shards(sweep_dir: Path) -> Path:
    """SWEEP_DIR/merged from the sweep's finished parts; an error names the unfinished ones."""
    jobs = finished_parts(sweep_dir)
    facts = [json.loads((job.path / "run.json").read_text(encoding="utf-8")) for job in jobs]
    check_one_config(sweep_dir, jobs, facts)
    order, solvers = _unsharded_order(facts[0]["config"])
    target = Path(sweep_dir) / MERGED
    target.mkdir(exist_ok=True)
    tables = parts_side_tables(jobs, facts, solvers)
    for table in tables:
        _merge_side_table(jobs, table, order, target)
    samples = _in_order(pl.concat([pl.read_parquet(j.path / "samples.parquet") for j in jobs], how="diagonal_relaxed"),
                        order)
    _write_merged(samples, jobs, [{**f, SIDE_TABLES: [t.fact() for t in tables]} for f in facts], target)
    return target


def check_one_config(sweep_dir: Path, jobs: list[Job], facts: list[dict[str, Any]]) -> None:
    """Refuse parts whose configs, as their run.json records them, differ in more than dataset.shard:
    `toolsweep judge SWEEP/N --overwrite` judges one part again and records its judge there (job.json
    keeps the sweep's overrides), and one table must not hold two judges' scores under one's name."""
    flat = [_flat(fact.get("config") or {}) for fact in facts]
    keys = sorted({key for one in flat for key in one} - {"dataset.shard"})
    differing = [key for key in keys if len({json.dumps(one.get(key), sort_keys=True) for one in flat}) > 1]
    if not differing:
        return
    judged = all(key.startswith("roles.") for key in differing)
    parts = "; ".join(f"shard {job.number} {'by ' if judged else 'with '}"
                      + ", ".join(f"{key}={_shown(one.get(key))}" for key in differing)
                      for job, one in zip(jobs, flat))
    what = "were judged differently, so their scores" if judged else "ran different configurations, so they"
    fix = (f"judge every shard alike (toolsweep judge {sweep_dir}/N --overwrite with the same overrides)" if judged
           else "rerun the shards that differ with the sweep's overrides")
    raise DatasetError(f"{sweep_dir}: its shards {what} are not one run's: {parts}; {fix} and merge again")


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as dotted keys (`roles.judge.engine.script`) and their values."""
    found: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            found.update(_flat(value, f"{prefix}{key}."))
        else:
            found[f"{prefix}{key}"] = value
    return found


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def parts_side_tables(jobs: list[Job], facts: list[dict[str, Any]], solvers: tuple[str, ...]) -> list[SideTable]:
    """The side tables any part lists in its run.json, in the order they are listed; a part written
    before run.json listed them stands for the tables its solvers declare that it holds."""
    from inference.solvers import present_side_tables

    found: dict[str, SideTable] = {}
    for job, fact in zip(jobs, facts):
        listed = side_tables_in(fact)
        if listed is None:
            listed = present_side_tables(solvers, job.path)
        found.update((t.name, t) for t in listed if t.name not in found)
    return list(found.values())


def _unsharded_order(config: dict[str, Any]) -> tuple[dict[str, int], tuple[str, ...]]:
    """(sample_id -> its position in the run without dataset.shard, the benchmark's solvers): the
    benchmark's files, read again."""
    from inference.run import load_samples, run_config

    whole = {**config, "dataset": {**config["dataset"], "shard": None, "shards": 1}}
    cfg, benchmark = run_config(whole)
    ids = load_samples(cfg, benchmark)["sample_id"].to_list()
    return {sample_id: number for number, sample_id in enumerate(ids)}, tuple(benchmark.solvers)


def _in_order(table: pl.DataFrame, order: dict[str, int], extra: tuple[str, ...] = (),
              key: str = "sample_id") -> pl.DataFrame:
    missing = [s for s in table[key].unique().to_list() if s not in order]
    if missing:
        raise DatasetError(f"the shards hold samples the unsharded run does not ({missing[:5]}): were they run on "
                           "other data? rerun them")
    position = table[key].replace_strict(order, return_dtype=pl.Int64)
    return table.with_columns(position.alias("__order")).sort("__order", *extra, maintain_order=True).drop("__order")


def _merge_side_table(jobs: list[Job], table: SideTable, order: dict[str, int], target: Path) -> None:
    paths = [job.path / table.name for job in jobs if (job.path / table.name).is_file()]
    if not paths:
        return
    joined = pl.concat([pl.read_parquet(p) for p in paths], how="diagonal_relaxed")
    missing = [c for c in (table.key, *table.order) if c not in joined.columns]
    if missing:
        raise DatasetError(f"side table {table.name} of the shards lacks its declared columns {missing}: rerun the "
                           "shards with this toolsweep")
    atomic_write(target / table.name, _in_order(joined, order, table.order, table.key).write_parquet)


def _write_merged(samples: pl.DataFrame, jobs: list[Job], facts: list[dict[str, Any]], target: Path) -> None:
    from grading.outputs import write_graded
    from grading.report import read_metadata
    from inference.finish import sample_facts
    from inference.runinfo import write_run_json

    merged = {**facts[0], "config": {**facts[0]["config"], "dataset": {**facts[0]["config"]["dataset"],
                                                                        "shard": None}},
              "shards": [str(job.path) for job in jobs], "samples": sample_facts(samples),
              "generation": {k: sum(f["generation"].get(k, 0) for f in facts)
                             for k in ("engine_calls", "stored_hits", "shards")}}
    meta = read_metadata(jobs[0].path / "samples.parquet")
    write_graded(samples, target, meta, facts=merged)
    write_run_json(target, merged)


def build_parser(prog: str = "toolsweep-merge") -> argparse.ArgumentParser:
    """The parser of `toolsweep merge` (described by main's docstring)."""
    parser = argparse.ArgumentParser(prog=prog, description=main.__doc__)
    parser.add_argument("sweep_dir", type=Path, help="the sweep dir of a -m dataset.shards=N dataset.shard=range(N) run")
    return parser


def main(argv: list[str] | None = None, prog: str = "toolsweep-merge") -> int:
    """`toolsweep merge SWEEP_DIR`: join a sharded run's parts into SWEEP_DIR/merged."""
    args = build_parser(prog).parse_args(argv)
    try:
        target = merge_shards(args.sweep_dir)
    except (ToolsweepError, GradingError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    print(f"[toolsweep] merged {args.sweep_dir} into {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
