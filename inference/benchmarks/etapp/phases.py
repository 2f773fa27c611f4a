"""The two model phases of an ETAPP run, each runnable in its own process:

    python -m inference.benchmarks.etapp.phases agent RUN_DIR
    python -m inference.benchmarks.etapp.phases judge RUN_DIR

Each reads the run's resolved config from RUN_DIR/etapp/config.json, writes its Parquet file
(trajectories.parquet + episodes.parquet; judgements.parquet) and its facts (etapp/<phase>.json).
Generations go through the run's store, so a killed phase rerun regenerates nothing it finished.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from grading.files import atomic_write, atomic_write_text
from inference import pipeline
from .agent import Episode, Grammar, Limits, run_turns
from .cases import Case, load_cases
from .episodes import Context, new_episode, new_sandbox, no_render, template_renderer
from inference.config import ToolsweepConfig, typed_config
from inference.runinfo import Timer

CONFIG = Path("etapp/config.json")
TRAJECTORY_SCHEMA = {
    "sample_id": pl.String, "case_id": pl.String, "setting": pl.String, "method": pl.String, "index": pl.Int64,
    "turn": pl.Int64, "role": pl.String, "content": pl.String, "tool_calls": pl.String, "tool_name": pl.String,
    "arguments": pl.String, "observation": pl.String, "tool_error": pl.Boolean, "finish_reason": pl.String,
    "prompt_tokens": pl.Int64, "output_tokens": pl.Int64}
EPISODE_SCHEMA = {
    "sample_id": pl.String, "turns": pl.Int64, "n_calls": pl.Int64, "valid_calls": pl.Int64, "tool_errors": pl.Int64,
    "nudges": pl.Int64, "end_reason": pl.String, "final_answer": pl.String, "called_tools": pl.String,
    "agent_prompt_tokens": pl.Int64, "agent_output_tokens": pl.Int64}


def load_config(run_dir: Path) -> ToolsweepConfig:
    return typed_config(json.loads((run_dir / CONFIG).read_text(encoding="utf-8")))


def travelplanner_path(cfg: ToolsweepConfig) -> Path:
    if cfg.etapp.travelplanner:
        return Path(cfg.etapp.travelplanner).expanduser()
    return Path(cfg.dataset.path).expanduser().resolve().parent / "travelplanner"


def selected_cases(cfg: ToolsweepConfig) -> list[Case]:
    return load_cases(Path(cfg.dataset.path).expanduser(), cfg.etapp.users, cfg.etapp.instructions)


def agent_config(cfg: ToolsweepConfig) -> ToolsweepConfig:
    """The run config as the agent's engine sees it: etapp.max_new_tokens per call (in the cache key)."""
    return replace(cfg, decoding=replace(cfg.decoding, max_new_tokens=cfg.etapp.max_new_tokens))


def agent_phase(cfg: ToolsweepConfig, run_dir: Path) -> dict[str, Any]:
    """Run every episode to its end; write trajectories.parquet and episodes.parquet."""
    if cfg.etapp.upstream:
        return import_phase(cfg, run_dir)
    timer = Timer()
    cfg = agent_config(cfg)
    dtype = pipeline.resolve_dtype(cfg) if cfg.engine.loads_model else None
    with timer.phase("setup"):
        cases = selected_cases(cfg)
        context = Context.load(Path(cfg.dataset.path).expanduser(), travelplanner_path(cfg))
        tokenizer = pipeline.load_tokenizer(cfg.model.path) if cfg.engine.loads_model else None
        max_len = pipeline.context_length(cfg) if tokenizer is not None else 1 << 30
        render = template_renderer(tokenizer) if tokenizer is not None else no_render
    ids = list(ids_order(cfg, cases))
    if cfg.engine.loads_model:
        generate, stats = pipeline.store_generator(cfg, run_dir, max_len, ids, timer)
    else:
        engine = pipeline.make_engine(cfg, max_len, ids)
        generate, stats = engine.generate, {"engine_calls": 0, "stored_hits": 0, "shards": 0, "backend": "none"}
    limits = Limits.of(cfg.etapp, max_len)
    grammar = agent_grammar(cfg, context)
    with timer.phase("agent"):
        episodes = run_episodes(cfg, cases, context, generate, render, limits, grammar)
    write_episodes(episodes, run_dir)
    return phase_facts("agent", timer, stats, episodes_tokens(episodes), dtype)


def import_phase(cfg: ToolsweepConfig, run_dir: Path) -> dict[str, Any]:
    """Upstream's saved trajectories instead of an agent run (no model)."""
    from .upstream import imported_episode, read_upstream

    timer = Timer()
    cases = selected_cases(cfg)
    found, _ = read_upstream(Path(cfg.etapp.upstream).expanduser(), sorted({c.user for c in cases}),
                             sorted({c.instruction for c in cases}))
    setting, method = cfg.dataset.settings[0], cfg.etapp.methods[0]
    with timer.phase("agent"):
        episodes = [imported_episode(c, setting, method, found[c.user][c.instruction]["output"]) for c in cases]
    write_episodes(episodes, run_dir)
    stats = {"engine_calls": 0, "stored_hits": 0, "shards": 0, "backend": "imported"}
    return phase_facts("agent", timer, stats, episodes_tokens(episodes), None)


def agent_grammar(cfg: ToolsweepConfig, context: Context) -> Grammar:
    """The per-turn constraint: any of the 35 tools may be called (upstream runs whatever is named)."""
    if cfg.decoding.constraint == "none":
        return Grammar(False)
    from .agent_text import react_grammar_regex
    from inference.schemas import compact_json

    names = list(context.toolkit)
    schema = {"type": "object", "properties": {"name": {"enum": names}, "arguments": {"type": "object"}},
              "required": ["name", "arguments"], "additionalProperties": False}
    # Unbounded parts: max_new_tokens bounds them, and a bound grows a DFA backend's automaton.
    return Grammar(True, compact_json(schema), react_regex=react_grammar_regex(names, None, None, None))


def run_episodes(cfg: ToolsweepConfig, cases: list[Case], context: Context, generate: Any, render: Any,
                 limits: Limits, grammar: Grammar) -> list[Episode]:
    """All episodes; under etapp.state=sequential a user's cases run one after another (in
    instruction order) on one sandbox, every user's n-th case in one wave."""
    state = cfg.etapp.state
    progress = pipeline.marker
    if state != "sequential":
        episodes = [new_episode(c, s, m, context, new_sandbox(c, s, state, context))
                    for s in cfg.dataset.settings for m in cfg.etapp.methods for c in cases]
        run_turns(episodes, generate, render, limits, grammar, progress)
        return episodes
    sandboxes: dict[tuple[str, str, str], Any] = {}
    episodes = []
    for wave in _waves(cases):
        batch = []
        for s in cfg.dataset.settings:
            for m in cfg.etapp.methods:
                for case in wave:
                    key = (s, m, case.user)
                    if key in sandboxes:
                        sandboxes[key].advance(case.timestamp)
                    else:
                        sandboxes[key] = new_sandbox(case, s, "tool", context)
                    batch.append(new_episode(case, s, m, context, sandboxes[key]))
        run_turns(batch, generate, render, limits, grammar, progress)
        episodes += batch
    order = ids_order(cfg, cases)  # once: sorting calls the key per episode
    return sorted(episodes, key=lambda e: order[e.sample_id])


def ids_order(cfg: ToolsweepConfig, cases: list[Case]) -> dict[str, int]:
    ids = [f"{s}/{m}/{c.case_id}" for s in cfg.dataset.settings for m in cfg.etapp.methods for c in cases]
    return {sample_id: i for i, sample_id in enumerate(ids)}


def _waves(cases: list[Case]) -> list[list[Case]]:
    by_user: dict[str, list[Case]] = {}
    for case in cases:
        by_user.setdefault(case.user, []).append(case)
    depth = max(len(v) for v in by_user.values())
    return [[v[i] for v in by_user.values() if i < len(v)] for i in range(depth)]


def write_episodes(episodes: list[Episode], run_dir: Path) -> None:
    rows = [r for e in episodes for r in e.rows]
    trajectories = pl.DataFrame(rows, schema=TRAJECTORY_SCHEMA)
    summary = pl.DataFrame([{
        "sample_id": e.sample_id, "turns": e.turn, "n_calls": e.calls, "valid_calls": e.valid_calls,
        "tool_errors": e.tool_errors, "nudges": e.nudges, "end_reason": e.end_reason, "final_answer": e.answer,
        "called_tools": json.dumps(e.called), "agent_prompt_tokens": e.prompt_tokens,
        "agent_output_tokens": e.output_tokens} for e in episodes], schema=EPISODE_SCHEMA)
    atomic_write(run_dir / "trajectories.parquet", trajectories.write_parquet)
    atomic_write(run_dir / "episodes.parquet", summary.write_parquet)


def episodes_tokens(episodes: list[Episode]) -> dict[str, int]:
    return {"prompt_tokens": sum(e.prompt_tokens for e in episodes),
            "output_tokens": sum(e.output_tokens for e in episodes)}


def phase_facts(phase: str, timer: Timer, stats: dict[str, Any], tokens: dict[str, int],
                dtype: Any) -> dict[str, Any]:
    work_s = max(timer.phases.get(phase, 0.0) - timer.phases.get("model_load", 0.0), 1e-9)
    generated = stats["engine_calls"] > 0
    return {"wall_s": {**timer.phases, "total": timer.total()}, "generation": stats, "dtype": dtype, **tokens,
            "prompt_tokens_per_s": round(tokens["prompt_tokens"] / work_s, 1) if generated else None,
            "output_tokens_per_s": round(tokens["output_tokens"] / work_s, 1) if generated else None}


def log_to(path: Path) -> None:
    """The phase's process logs as the run's does: everything to run.log, the console through a
    stream handler that console.setup quiets (no Hydra here to set them up)."""
    import logging

    root = logging.getLogger()
    root.setLevel(logging.INFO)
    file = logging.FileHandler(path, encoding="utf-8")
    file.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    root.addHandler(file)
    root.addHandler(logging.StreamHandler(sys.stderr))


def main(argv: list[str] | None = None) -> None:
    """`python -m inference.benchmarks.etapp.phases {agent|judge} RUN_DIR`."""
    from inference import console
    from inference.errors import ToolsweepError

    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2 or args[0] not in ("agent", "judge"):
        sys.exit("usage: python -m inference.benchmarks.etapp.phases {agent|judge} RUN_DIR")
    phase, run_dir = args[0], Path(args[1])
    cfg = load_config(run_dir)
    log_to(run_dir / "run.log")
    console.setup(verbose=cfg.verbose, quiet=cfg.quiet)
    started = time.time()
    try:
        if phase == "agent":
            facts = agent_phase(cfg, run_dir)
        else:
            from .judge import judge_phase

            facts = judge_phase(cfg, run_dir)
    except ToolsweepError as exc:
        print(f"toolsweep: error: {exc}", file=sys.stderr)
        sys.exit(2)
    facts["started"] = started
    atomic_write_text(run_dir / "etapp" / f"{phase}.json", json.dumps(facts, indent=2, default=str))


if __name__ == "__main__":
    main()
