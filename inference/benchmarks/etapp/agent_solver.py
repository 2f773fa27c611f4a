"""ETAPP's agent solver: every case's episode run to its end through the `model` role.

Each sample (a case under one setting and method) gets an episode with its own sandbox;
every turn is one batched generate over the live episodes (agent.py). The episodes' messages
are written to RUN_DIR/trajectories.parquet (what the judge reads); the sample table gets how
each episode went. With `dataset.upstream`, upstream's saved trajectories stand in for the
agent (no model).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import polars as pl

from grading.files import atomic_write
from grading.views import MESSAGES, SideTable
from inference.console import marker
from inference.failures import ENGINE_ERROR, TOO_LONG
from inference.generation import MODEL_ROLE
from inference.solvers import SolveContext
from .agent import Episode, Grammar, Limits, run_turns
from .cases import load_cases
from .episodes import Context, Slot, new_episode, new_sandbox
from .options import EtappOptions
from .prompt_files import UpstreamFiles, resolve

SCORER = "etapp_judge"
TRAJECTORIES = "trajectories.parquet"
TRAJECTORY_SCHEMA = {
    "sample_id": pl.String, "case_id": pl.String, "setting": pl.String, "method": pl.String, "index": pl.Int64,
    "turn": pl.Int64, "role": pl.String, "content": pl.String, "tool_calls": pl.String, "tool_name": pl.String,
    "arguments": pl.String, "observation": pl.String, "tool_error": pl.Boolean, "finish_reason": pl.String,
    "prompt_tokens": pl.Int64, "output_tokens": pl.Int64}
TRAJECTORY_TABLE = SideTable(TRAJECTORIES, MESSAGES, order=("index",), schema=TRAJECTORY_SCHEMA,
                             description="every message of every episode, in order")
EPISODE_SCHEMA = {
    "sample_id": pl.String, "turns": pl.Int64, "n_calls": pl.Int64, "valid_calls": pl.Int64, "tool_errors": pl.Int64,
    "nudges": pl.Int64, "end_reason": pl.String, "final_answer": pl.String, "called_tools": pl.String,
    "agent_prompt_tokens": pl.Int64, "agent_output_tokens": pl.Int64, "model_calls": pl.Int64}


def travelplanner_path(options: EtappOptions) -> Path:
    if options.travelplanner:
        return Path(options.travelplanner).expanduser()
    return Path(options.path).expanduser().resolve().parent / "travelplanner"


def prompt_source(options: EtappOptions, shown: bool = True) -> Optional[UpstreamFiles]:
    """Upstream's texts from the ETAPP copy, or None for the project's own (dataset.prompts);
    one notice line says which."""
    root = Path(options.path).expanduser()
    files = resolve(options.prompts, root)
    if shown:
        marker(f"ETAPP texts: upstream's, read from {root} (dataset.prompts={options.prompts})" if files else
               f"ETAPP texts: toolsweep's own (dataset.prompts={options.prompts}"
               + ("" if options.prompts == "own" else f"; upstream's prompt files are not under {root}") + ")")
    return files


def texts_facts(files: Optional[UpstreamFiles], options: EtappOptions) -> dict[str, Any]:
    """run.json's record of the texts: which, and the SHA-256 of every upstream file read."""
    return files.facts() if files else {"texts": "own", "option": options.prompts}


def _texts_line(texts: dict[str, Any]) -> str:
    if texts["texts"] != "upstream":
        return "toolsweep's own wording"
    hashes = ", ".join(f"{Path(name).name} {digest[:12]}" for name, digest in texts["sha256"].items())
    return f"upstream's, read from the ETAPP copy ({hashes}); reminders {texts['reminders']}"


def sample_cases(samples: pl.DataFrame, options: EtappOptions) -> list[Slot]:
    """The slot of every sample (its setting, method, case and sample index), in table order."""
    cases = {c.case_id: c for c in load_cases(Path(options.path).expanduser(), options.users, options.instructions)}
    index = samples["sample_index"] if "sample_index" in samples.columns else pl.repeat(0, samples.height, eager=True)
    rows = samples.select("etapp_setting", "method", "case_id", "sample_id").with_columns(index.alias("sample_index"))
    return [Slot(s, m, cases[c], sid, i) for s, m, c, sid, i in rows.iter_rows()]


class AgentSolver:
    """The agent loop (FC, ReAct, E-ReAct) over the run's cases."""

    role = MODEL_ROLE
    side_tables = (TRAJECTORY_TABLE,)

    def solve(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        options: EtappOptions = context.cfg.dataset
        files = prompt_source(options, shown=not options.upstream)  # read once: the run and its facts
        with context.timer.phase("generate"):
            episodes, family = ((imported_episodes(samples, options), None) if options.upstream
                                else run_agent(samples, context, files))
        write_trajectories(episodes, context.run_dir)
        context.facts["prompt"] = {"format": "etapp", "methods": list(options.methods)}
        texts = texts_facts(files, options)
        context.facts["report_facts"] = {"agent texts": "upstream's imported trajectories" if options.upstream
                                         else _texts_line(texts)}
        context.facts["etapp"] = {"state": options.state, "max_turns": options.max_turns,
                                  **({"fc_family": family} if family and "fc" in options.methods else {}),
                                  "reasoning": options.reasoning,
                                  "texts": texts if not options.upstream else None,
                                  "substitutes": _substitutes(), "end_reasons": _end_reasons(episodes),
                                  **_search_model(samples)}
        return with_episodes(samples, episodes)

    def skip(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        raise NotImplementedError("the evaluated model's role cannot be switched off")


def run_agent(samples: pl.DataFrame, context: SolveContext,
              files: Optional[UpstreamFiles]) -> tuple[list[Episode], str]:
    """Every episode, and the family FC calls were read in (`files`: upstream's texts, or None)."""
    cfg, options = context.cfg, context.cfg.dataset
    generator = context.generator(MODEL_ROLE)
    world = Context.load(Path(options.path).expanduser(), travelplanner_path(options), files)
    limits = Limits(options.max_turns, cfg.decoding.max_new_tokens, generator.max_model_len or 1 << 30,
                    options.max_calls_per_response, options.max_calls_per_case, options.max_tokens_per_call)
    grammar = agent_grammar(cfg.decoding.constraint, world, cfg.model.tool_parser, generator, options.reasoning)
    return run_episodes(sample_cases(samples, options), options.state, world, generator, limits, grammar,
                        options.episodes_per_batch), grammar.call_format


def agent_grammar(constraint: str, world: Context, parser: str | None, generator: Any,
                  reasoning: bool = False) -> Grammar:
    """The per-turn constraint and readers: any of the 35 tools may be called (upstream runs
    whatever is named), in the call format of the family `parser` names; unset, the family the
    model's chat template implies, as single-call benchmarks guess it (Hermes where there is no
    template: engine=script, replay). `reasoning`: dataset.reasoning (ReAct drops `<think>`)."""
    from .fc_reading import fc_reader
    from inference.toolcalls import guess_parser

    family = parser or guess_parser(getattr(generator.tokenizer, "chat_template", None))
    read = fc_reader(family, lambda: generator.tokenizer)
    if constraint == "none":
        return Grammar(False, call_format=family, read_fc=read, reasoning=reasoning)
    from .agent_text import react_grammar_regex
    from inference.schemas import named_call_schema
    from inference.toolcalls import call_format

    names = list(world.toolkit)
    args_key = call_format(family).args_key  # checks.unused_options refused a family without a grammar
    # Unbounded parts: max_new_tokens bounds them, and a bound grows a DFA backend's automaton.
    return Grammar(True, named_call_schema(names, args_key), react_regex=react_grammar_regex(names, None, None, None),
                   call_format=family, read_fc=read, reasoning=reasoning)


def run_episodes(samples: list[Slot], state: str, world: Context, generator: Any, limits: Limits,
                 grammar: Grammar, per_batch: int | None = None) -> list[Episode]:
    """All episodes, in sample order, `per_batch` at a time (None: all together); under
    state=sequential a user's cases run one after another (in instruction order) on one sandbox
    (one per sample index: each repetition is its own sequence), every user's n-th case in one wave."""
    if state != "sequential":
        episodes = [new_episode(s, world, new_sandbox(s.case, s.setting, state, world)) for s in samples]
        _drive(episodes, generator, limits, grammar, per_batch)
        return episodes
    sandboxes: dict[tuple[str, str, str, int], Any] = {}
    done: dict[str, Episode] = {}
    for wave in _waves(samples):
        batch = []
        for slot in wave:
            key = _sequence(slot)
            if key in sandboxes:
                sandboxes[key].advance(slot.case.timestamp)
            else:
                sandboxes[key] = new_sandbox(slot.case, slot.setting, "tool", world)
            batch.append(new_episode(slot, world, sandboxes[key]))
        _drive(batch, generator, limits, grammar, per_batch)
        done.update((e.sample_id, e) for e in batch)
    return [done[s.sample_id] for s in samples]


def _sequence(slot: Slot) -> tuple[str, str, str, int]:
    """The cases that share one sandbox under state=sequential."""
    return (slot.setting, slot.method, slot.case.user, slot.sample_index)


def _drive(episodes: list[Episode], generator: Any, limits: Limits, grammar: Grammar, per_batch: int | None) -> None:
    size = per_batch or max(len(episodes), 1)
    for start in range(0, len(episodes), size):
        run_turns(episodes[start:start + size], generator.generate, generator.render, limits, grammar, marker)


def _waves(samples: list[Slot]) -> list[list[Slot]]:
    """The n-th case of every sequence (setting, method, user, sample index) in wave n, cases in
    instruction order."""
    by_user: dict[tuple[str, str, str, int], list[Slot]] = {}
    for slot in samples:
        by_user.setdefault(_sequence(slot), []).append(slot)
    lines = [sorted(v, key=lambda slot: slot.case.instruction) for v in by_user.values()]
    depth = max((len(v) for v in lines), default=0)
    return [[v[i] for v in lines if i < len(v)] for i in range(depth)]


def imported_episodes(samples: pl.DataFrame, options: EtappOptions) -> list[Episode]:
    """Upstream's saved trajectories instead of an agent run (no model)."""
    from .upstream import imported_episode, read_upstream

    slots = sample_cases(samples, options)
    found, _ = read_upstream(Path(options.upstream).expanduser(), sorted({s.case.user for s in slots}),
                             sorted({s.case.instruction for s in slots}))
    return [imported_episode(s, found[s.case.user][s.case.instruction]["output"]) for s in slots]


def write_trajectories(episodes: list[Episode], run_dir: Path) -> None:
    rows = [r for e in episodes for r in e.rows]
    atomic_write(run_dir / TRAJECTORIES, pl.DataFrame(rows, schema=TRAJECTORY_SCHEMA).write_parquet)


def with_episodes(samples: pl.DataFrame, episodes: list[Episode]) -> pl.DataFrame:
    """The sample table with how each episode went, in the run's common columns too."""
    summary = pl.DataFrame([{
        "sample_id": e.sample_id, "turns": e.turn, "n_calls": e.calls, "valid_calls": e.valid_calls,
        "tool_errors": e.tool_errors, "nudges": e.nudges, "end_reason": e.end_reason, "final_answer": e.answer,
        "called_tools": json.dumps(e.called), "agent_prompt_tokens": e.prompt_tokens,
        "agent_output_tokens": e.output_tokens, "model_calls": e.model_calls} for e in episodes], schema=EPISODE_SCHEMA)
    table = samples.join(summary, on="sample_id", how="left", maintain_order="left")
    # An engine error, or a prompt grown past the context (too_long), is an error of the run: it
    # counts against max_error_rate.
    failure = pl.when(pl.col("end_reason").is_in([ENGINE_ERROR, TOO_LONG])).then(pl.col("end_reason"))
    return table.with_columns(
        pl.lit(SCORER).alias("scorer"), pl.col("final_answer").alias("output"),
        failure.otherwise(None).alias("failure"),
        pl.col("agent_prompt_tokens").alias("prompt_tokens"), pl.col("agent_output_tokens").alias("output_tokens"),
        pl.lit(None, dtype=pl.String).alias("error"))


def _substitutes() -> dict[str, Any]:
    from .sandbox import SUBSTITUTE_VERSIONS

    return SUBSTITUTE_VERSIONS


def _search_model(samples: pl.DataFrame) -> dict[str, Any]:
    """The search_tools model's facts, for a run with tool_retrieval cases (the only ones that use it)."""
    if not samples["sample_id"].str.starts_with("tool_retrieval/").any():
        return {}
    from .sandbox.embeddings import model_facts

    return {"search_tools_model": model_facts()}


def _end_reasons(episodes: list[Episode]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for episode in episodes:
        counts[episode.end_reason or "missing"] = counts.get(episode.end_reason or "missing", 0) + 1
    return dict(sorted(counts.items()))


SOLVER = AgentSolver()
