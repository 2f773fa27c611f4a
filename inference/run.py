"""One run of any benchmark: load -> solvers (each through its model role) -> the run's ending.

    samples = the benchmark's loader (+ its `select` over its own options)
    for each solver: its role's generator renders and generates through the run's store
    ending: grade -> metrics (with the scorer's subsets) -> reports -> run.json -> error budget

`toolsweep` runs all of it; `toolsweep judge RUN_DIR` reruns the solvers of the roles besides
the evaluated model on the stored output of the others; `toolsweep grade` reruns the grading
part of the ending (grading/regrade.py). A solver whose role loads weights runs in its own
process when the benchmark has more than one solver, so its model's memory is freed when it
ends (`python -m inference.run RUN_DIR STEP`); the child dies with this process, so a killed
run leaves no orphan holding the GPU.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import polars as pl

from grading.files import atomic_write, atomic_write_text
from grading.views import SIDE_TABLES
from inference.benchmarks import get_benchmark
from inference.config import ToolsweepConfig, typed_config, validate
from inference.console import marker
from inference.errors import ConfigError, DatasetError, ToolsweepError
from inference.generation import MODEL_ROLE, Generator, Role
from inference.models import is_embedded_path, prepare_embedded_model
from inference.repeats import repeat_samples
from inference.shards import shard_of, subsample
from inference.runinfo import Timer
from inference.solvers import SolveContext, get_solver, present_side_tables

STEPS = Path("steps")
"""Under the run dir: the resolved config and each solver's output table and facts."""
CONFIG = STEPS / "config.json"


class StepFailed(ToolsweepError):
    """A solver's process exited with an error (its message is above, and in run.log)."""


def run_config(data: dict[str, Any]) -> tuple[ToolsweepConfig, Any]:
    """A resolved config dict as typed config, with its benchmark (whose options type `dataset`)."""
    name = (data.get("dataset") or {}).get("name")
    if not isinstance(name, str):
        raise ConfigError(f"dataset.name must name a benchmark, got {name!r}: choose one with dataset=NAME")
    benchmark = get_benchmark(name)
    return typed_config(data, benchmark.options), benchmark


def prepare_models(cfg: ToolsweepConfig, benchmark: Any) -> None:
    """Build the embedded model's folder where a role uses it and it is missing."""
    for name in (MODEL_ROLE, *[r for r in cfg.roles if cfg.roles[r].enabled]):
        role = Role.of(cfg, name)
        native = name == MODEL_ROLE and (cfg.prompt.format or benchmark.prompt_format) == "native"
        if role.model.embedded and (role.engine.loads_model or native) and is_embedded_path(role.model.path):
            prepare_embedded_model()
            return


def load_samples(cfg: ToolsweepConfig, benchmark: Any) -> pl.DataFrame:
    """The benchmark's sample table for the configured settings and limit, selected by its
    options, this run's shard of it (inference.shards), each record repeated
    `decoding.samples` times (inference.repeats)."""
    records = subsample(load_records(cfg, benchmark), benchmark, cfg.dataset, cfg.dataset.subsample_seed)
    records = shard_of(records, benchmark, cfg.dataset)
    return repeat_samples(records, cfg.decoding.samples)


def load_records(cfg: ToolsweepConfig, benchmark: Any) -> pl.DataFrame:
    """The benchmark's records for the configured settings and limit, selected by its options."""
    settings = tuple(cfg.dataset.settings) or benchmark.settings
    if benchmark.select is None:
        return benchmark.load(Path(cfg.dataset.path).expanduser(), settings, cfg.dataset.limit)
    # the limit applies to what the benchmark's own options select
    table = benchmark.select(benchmark.load(Path(cfg.dataset.path).expanduser(), settings, None), cfg.dataset)
    limit = cfg.dataset.limit
    return table.filter(pl.int_range(pl.len()).over("setting") < limit) if limit else table


def evaluate(cfg: ToolsweepConfig, benchmark: Any, run_dir: Path, resolved: dict[str, Any],
             start: int = 0) -> dict[str, Any]:
    """Run one evaluation into `run_dir` (from solver `start`); returns the facts written to run.json.

    The run dir records its state (running, complete, failed); rerunning into the same dir
    resumes from the generations already stored."""
    from inference.finish import finish_run
    from inference.runinfo import run_dir_lock, write_run_json, write_state

    run_dir.mkdir(parents=True, exist_ok=True)
    with run_dir_lock(run_dir):  # a second live run on this dir stops here (RunDirBusy, exit 2)
        write_state(run_dir, "running")
        try:
            timer = Timer()
            table, solved = solve_all(cfg, benchmark, run_dir, resolved, timer, start)
            facts = finish_run(table, cfg, run_dir, resolved, timer, solved)
        except BaseException as exc:
            write_state(run_dir, "failed", f"{type(exc).__name__}: {exc}")
            raise
        write_state(run_dir, "complete")
        write_run_json(run_dir, facts)
        return facts


def solve_all(cfg: ToolsweepConfig, benchmark: Any, run_dir: Path, resolved: dict[str, Any], timer: Timer,
              start: int = 0) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Run the benchmark's solvers from number `start` (earlier ones' tables are read from the
    run dir); returns the final table and the facts of every solver and role."""
    names = benchmark.solvers
    isolate = len(names) > 1
    if isolate:
        save_config(run_dir, resolved)
        if any(Role.of(cfg, get_solver(name).role).engine.loads_model for name in names[start:]):
            from inference.preload import start_early

            start_early()  # the solvers' processes fork from it: its imports run while the samples load
    with timer.phase("load"):
        table = load_samples(cfg, benchmark) if start == 0 else read_step(run_dir, start - 1)
    facts: dict[str, Any] = {"solvers": {}, "roles": {}}
    for number in range(start):  # earlier solvers' facts, from the run dir
        _gather(facts, names[number], get_solver(names[number]).role, read_step_facts(run_dir, number))
    for number in range(start, len(names)):
        solver = get_solver(names[number])
        enabled = solver.role == MODEL_ROLE or cfg.roles[solver.role].enabled
        marker(f"solver {number + 1}/{len(names)}: {names[number]} ({solver.role})")
        with timer.phase(f"solve_{number}"):
            if not enabled:
                table, step = solver.skip(table, _context(cfg, benchmark, run_dir, timer)), {"skipped": True}
            elif isolate and Role.of(cfg, solver.role).engine.loads_model:
                table, step = run_isolated(run_dir, number)  # its process wrote the step
            else:
                table, step = solve_step(cfg, benchmark, run_dir, timer, number, table)
        if isolate and not (enabled and Role.of(cfg, solver.role).engine.loads_model):
            write_step(run_dir, number, table, step)
        _gather(facts, names[number], solver.role, step)
    facts[SIDE_TABLES] = [t.fact() for t in present_side_tables(names, run_dir)]
    return table, facts


def _gather(facts: dict[str, Any], name: str, role: str, step: dict[str, Any]) -> None:
    facts["solvers"][name] = step.get("solver", {})
    if "role" in step:
        facts["roles"][role] = step["role"]


def _context(cfg: ToolsweepConfig, benchmark: Any, run_dir: Path, timer: Timer) -> SolveContext:
    def generator(role: str) -> Generator:
        return Generator(Role.of(cfg, role), run_dir, timer, needs_tokenizer=_needs_tokenizer(cfg, benchmark, role),
                         # a shard or a subsample: stored answers may cover samples outside it
                         partial=cfg.dataset.shard is not None or cfg.dataset.subsample is not None,
                         benchmark=benchmark)

    return SolveContext(cfg, benchmark, run_dir, timer, generator)


def _needs_tokenizer(cfg: ToolsweepConfig, benchmark: Any, role: str) -> bool:
    """A replay run of the native format still reads its calls with the family's parser."""
    return role == MODEL_ROLE and (cfg.prompt.format or benchmark.prompt_format) == "native"


def solve_step(cfg: ToolsweepConfig, benchmark: Any, run_dir: Path, timer: Timer, number: int,
               table: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, Any]]:
    """One solver in this process: its table and its facts (the solver's, its role's)."""
    solver = get_solver(benchmark.solvers[number])
    context = _context(cfg, benchmark, run_dir, timer)
    started = Timer()
    solved = solver.solve(table, context)
    step: dict[str, Any] = {"solver": context.facts}
    generator = context.built.get(solver.role)
    if generator is not None:
        step["role"] = {**generator.facts(), **_speeds(generator, started.total(), timer)}
    return solved, step


def _speeds(generator: Generator, wall: float, timer: Timer) -> dict[str, Any]:
    """Token rates over the generating time (a solver's own `generate` phase where it has one),
    without the model load."""
    work = max(timer.phases.get("generate", wall) - timer.phases.get("model_load", 0.0), 1e-9)
    generated = generator.stats["engine_calls"] > 0
    tokens = generator.tokens
    return {"work_s": round(work, 3),
            "prompt_tokens_per_s": round(tokens["prompt_tokens"] / work, 1) if generated else None,
            "output_tokens_per_s": round(tokens["output_tokens"] / work, 1) if generated else None}


def run_isolated(run_dir: Path, number: int) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Solver `number` in a child process (its input: the previous step's table on disk, which the
    step before it wrote); returns what the child wrote."""
    from inference.preload import spawn

    code = spawn("inference.run", [str(run_dir), str(number)], dict(os.environ), "toolsweep-step").wait()
    if code != 0:
        raise StepFailed(f"solver {number + 1} failed in its process (exit {code}); its error is printed above and "
                         f"in {run_dir / 'run.log'}. Rerun the same command with hydra.run.dir={run_dir} to resume.")
    return read_step(run_dir, number), read_step_facts(run_dir, number)


def step_path(run_dir: Path, number: int) -> Path:
    return run_dir / STEPS / f"{number}.parquet"


def write_step(run_dir: Path, number: int, table: pl.DataFrame, facts: dict[str, Any]) -> None:
    path = step_path(run_dir, number)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, table.write_parquet)
    atomic_write_text(path.with_suffix(".json"), json.dumps(facts, indent=2, default=str))


def read_step(run_dir: Path, number: int) -> pl.DataFrame:
    path = step_path(run_dir, number)
    if not path.is_file():
        raise DatasetError(f"{path} does not exist: run the run's earlier solvers first (rerun the run with "
                           f"hydra.run.dir={run_dir})")
    return pl.read_parquet(path)


def read_step_facts(run_dir: Path, number: int) -> dict[str, Any]:
    path = step_path(run_dir, number).with_suffix(".json")
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def save_config(run_dir: Path, resolved: dict[str, Any]) -> None:
    (run_dir / CONFIG).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / CONFIG, json.dumps(resolved, indent=2, default=str))


def load_config(run_dir: Path) -> tuple[ToolsweepConfig, Any, dict[str, Any]]:
    """The typed config, benchmark and resolved dict a run saved in its run dir."""
    path = run_dir / CONFIG
    if not path.is_file():
        raise DatasetError(f"{run_dir} has no {CONFIG}: give a run dir that toolsweep wrote")
    data = json.loads(path.read_text(encoding="utf-8"))
    cfg, benchmark = run_config(data)
    return cfg, benchmark, data


def step_main(argv: list[str]) -> None:
    """`python -m inference.run RUN_DIR STEP`: one solver of a saved run, in this process."""
    from inference import console
    from inference.runinfo import log_to

    run_dir, number = Path(argv[0]), int(argv[1])
    cfg, benchmark, _ = load_config(run_dir)
    log_to(run_dir / "run.log")
    console.setup(verbose=cfg.verbose, quiet=cfg.quiet)
    timer = Timer()
    try:
        table = load_samples(cfg, benchmark) if number == 0 else read_step(run_dir, number - 1)
        solved, facts = solve_step(cfg, benchmark, run_dir, timer, number, table)
    except ToolsweepError as exc:
        print(f"toolsweep: error: {exc}", file=sys.stderr)
        sys.exit(2)
    facts.setdefault("role", {})["wall_s"] = {**timer.phases, "total": timer.total()}
    write_step(run_dir, number, solved, facts)


if __name__ == "__main__":
    step_main(sys.argv[1:])
