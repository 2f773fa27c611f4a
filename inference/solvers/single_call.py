"""One prompt, one answer: the single-call benchmarks' solver (one tool call, or a refusal, per prompt).

Stages, each over a Polars table: plan the prompt format -> attach call schemas and render every
prompt with the model's chat template (too_long rows for prompts that leave no room) -> one
batched generate through the `model` role -> the generation table with a failure class per
failed sample -> native format: the calls read by the model family's parser.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import polars as pl

from inference.config import NATIVE_FORMAT, ToolsweepConfig
from inference.console import marker
from inference.engines import Generation, Request
from inference.errors import ConfigError
from inference.failures import EMPTY_OUTPUT, ENGINE_ERROR, TOO_LONG
from inference.generation import MODEL_ROLE
from inference.prompts import (PromptSettings, attach_schemas, chat_messages, render_prompts,
                               template_has_tools)
from inference.solvers import SolveContext
from inference.toolcalls import CallFormat, call_format, guess_parser

@dataclass(frozen=True)
class PromptPlan:
    """How this run prompts and reads answers, resolved once from config, benchmark and template."""

    format: str
    """benchmark or native."""
    tool_parser: str | None = None
    """native: vLLM's parser that reads the calls."""
    template_tools: bool | None = None
    """native: whether the chat template renders tools (False: toolsweep's tool block instead)."""
    max_calls: int = 1
    calls_optional: bool = False
    """native: a constrained answer may hold no call (the benchmark's `calls_optional`)."""
    shorten: Callable[[str, int], str | None] | None = field(default=None, compare=False)
    """decoding.drop_oldest_history: the benchmark's `shorten` (None: off, or nothing to drop)."""

    @property
    def native(self) -> bool:
        return self.format == NATIVE_FORMAT

    @property
    def call_format(self) -> CallFormat | None:
        """The family wrapper a grammar adds (None: benchmark format, or a parser read but not constrained)."""
        return call_format(self.tool_parser) if self.native and self.tool_parser else None

    def facts(self) -> dict[str, Any]:
        """What run.json records about the prompt."""
        if not self.native:
            return {"format": self.format}
        return {"format": self.format, "tool_parser": self.tool_parser, "max_calls": self.max_calls,
                **({"calls_optional": True} if self.calls_optional else {}),
                "tools_in": "the chat template (tools=)" if self.template_tools
                else "a tool block in the system turn (the chat template ignores tools=)"}


def plan_prompts(cfg: ToolsweepConfig, benchmark: Any, tokenizer: Any | None) -> PromptPlan:
    """The run's prompt format: prompt.format, else the benchmark's authors' choice."""
    fmt = cfg.prompt.format or benchmark.prompt_format
    shorten = benchmark.shorten if cfg.decoding.drop_oldest_history else None
    if fmt != NATIVE_FORMAT:
        return PromptPlan(fmt, shorten=shorten)
    if tokenizer is None:
        raise ConfigError("prompt.format=native reads calls with the model family's parser, which needs the "
                          "model's tokenizer: set model.path to the model that produced the outputs")
    parser = cfg.model.tool_parser or guess_parser(getattr(tokenizer, "chat_template", None))
    from inference.engines.vllm_tool_parsers import call_reader

    call_reader(parser, tokenizer)  # a parser vLLM lacks, or one unfit for the tokenizer, fails here
    if cfg.decoding.constraint != "none" and call_format(parser) is None:
        raise ConfigError(f"model.tool_parser={parser} has no grammar in toolsweep (constrained native decoding "
                          "knows hermes, llama3_json and mistral); use decoding.constraint=none with it")
    return PromptPlan(fmt, parser, template_has_tools(tokenizer), benchmark.max_calls, benchmark.calls_optional,
                      shorten)


def build_prompts(cfg: ToolsweepConfig, samples: pl.DataFrame, tokenizer: Any | None,
                  max_model_len: int | None, plan: PromptPlan, render: bool = True) -> pl.DataFrame:
    """Rendered prompts, token counts, too_long rows and the call schema of every sample.

    Without rendering (replay), prompts stay empty: only schemas and gold coverage.
    """
    native = plan.call_format if plan.native else None
    if plan.native and native is None:  # a parser without a grammar: schema in Hermes keys
        native = call_format("hermes")
    table = attach_schemas(samples, cfg.decoding.constraint, cfg.decoding.max_string_chars, native)
    table = table.with_columns(pl.lit(plan.format).alias("prompt_format"))
    if tokenizer is None or not render:
        return table.with_columns(pl.lit(None, dtype=pl.String).alias("prompt"),
                                  pl.lit(None, dtype=pl.List(pl.Int32)).alias("prompt_token_ids"),
                                  pl.lit(None, dtype=pl.Int64).alias("prompt_tokens"),
                                  pl.lit(0, dtype=pl.Int64).alias("history_dropped"),
                                  pl.lit(None, dtype=pl.String).alias("failure"))
    settings = PromptSettings(max_model_len, cfg.decoding.max_new_tokens, plan.shorten,
                              native=plan.native, template_tools=bool(plan.template_tools))
    return render_prompts(table, tokenizer, settings)


def answer_coverage(prompts: pl.DataFrame, benchmark: Any, plan: PromptPlan) -> pl.DataFrame:
    """`gold_in_schema` where a benchmark-format answer is constrained by the benchmark's own
    grammar (a Lark `grammar` or an `answer_regex` column) rather than the call schema: whether
    the benchmark's own gold answer, as its gold writer (`toolsweep gold`) writes it, is inside
    that grammar. The call schema's verdict (attach_schemas) stands for every other answer."""
    own = [c for c in ("grammar", "answer_regex") if c in prompts.columns]
    if plan.native or not own:
        return prompts
    from inference.gold_answers import DEFAULT_PARSER, gold_outputs

    golds = gold_outputs(prompts, plan.format, DEFAULT_PARSER, benchmark)["output"].to_list()
    fits = [answer_fits(row.get("grammar"), row.get("answer_regex"), gold)
            for row, gold in zip(prompts.select(own).iter_rows(named=True), golds)]
    return prompts.with_columns(pl.Series("gold_in_schema", fits, dtype=pl.Boolean))


def answer_fits(grammar: str | None, regex: str | None, answer: str | None) -> bool | None:
    """Whether `answer` is inside a Lark grammar (xgrammar's own matcher, the backend that applies
    it) or a regex; None where the sample has neither (no constraint of its own)."""
    if answer is None:
        return False
    if grammar is not None:
        return _grammar_accepts(grammar, answer)
    if regex is not None:
        return re.fullmatch(regex, answer) is not None
    return None


def _grammar_accepts(grammar: str, answer: str) -> bool:
    from xgrammar import Grammar
    from xgrammar.testing import _is_grammar_accept_string  # xgrammar's byte-level matcher

    try:
        return bool(_is_grammar_accept_string(Grammar.from_lark(grammar), answer))
    except (RuntimeError, ValueError):  # a grammar xgrammar refuses: nothing is inside it
        return False


def sample_chat(row: dict[str, Any], native: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """A sample's chat (messages, tools or None), as `prompts.render_one` builds it for the template."""
    return chat_messages(row, native), json.loads(row["tool_specs"]) if native else None


def attach_chats(prompts: pl.DataFrame, plan: PromptPlan, generator: Any) -> pl.DataFrame:
    """engine=chat: add `chat_json`, each sample's chat as the server gets it (the system turn
    shortened as its rendered prompt was, under decoding.drop_oldest_history)."""
    column = "native_system" if plan.native else "system"
    chats = []
    columns = ["system", "native_system", "tool_specs", "user", "history_dropped",
               *(["prior_turns"] if "prior_turns" in prompts.columns else [])]
    for row in prompts.select(columns).iter_rows(named=True):
        if row["history_dropped"] and plan.shorten is not None:
            row[column] = plan.shorten(row[column] or "", row["history_dropped"])
        chats.append(generator.chat(*sample_chat(row, plan.native)))
    return prompts.with_columns(pl.Series("chat_json", chats, dtype=pl.String))


def requests_for(prompts: pl.DataFrame, constraint: str, plan: PromptPlan) -> list[Request]:
    """One request per sample that has not already failed (too_long). A benchmark-format answer
    with a `grammar` (Lark) or `answer_regex` column is constrained by it, not by the call schema."""
    fmt = plan.call_format
    chats = "chat_json" in prompts.columns
    own = [] if plan.native or constraint == "none" else [c for c in ("grammar", "answer_regex") if c in prompts.columns]
    extra = [*(["chat_json"] if chats else []), *own]
    return [Request(sample_id=row["sample_id"], prompt=row["prompt"],
                    prompt_token_ids=tuple(row["prompt_token_ids"] or ()),
                    schema_json=None if constraint == "none" or own else row["schema_json"],
                    call_format=fmt.parser if fmt else None, max_calls=plan.max_calls,
                    calls_optional=plan.native and plan.calls_optional,
                    sample_index=row["sample_index"], chat_json=row["chat_json"] if chats else None,
                    grammar=row.get("grammar"), regex=row.get("answer_regex"))
            for row in prompts.select("sample_id", "prompt", "prompt_token_ids", "schema_json", "failure",
                                      "sample_index", *extra)
            .iter_rows(named=True) if row["failure"] is None]


def read_calls(table: pl.DataFrame, plan: PromptPlan, tokenizer: Any) -> pl.DataFrame:
    """Native format: the `calls` column, each answer read by vLLM's parser of the model's family
    (JSON `[{"name", "arguments"}]`, `[]` when it found none, null for a failed sample)."""
    if not plan.native:
        return table.with_columns(pl.lit(None, dtype=pl.String).alias("calls"))
    from inference.engines.vllm_tool_parsers import call_reader

    read = call_reader(plan.tool_parser, tokenizer)
    calls = [None if failure is not None else json.dumps(read(output), ensure_ascii=False)
             for output, failure in table.select("output", "failure").iter_rows()]
    return table.with_columns(pl.Series("calls", calls, dtype=pl.String))


def collect(prompts: pl.DataFrame, generations: list[Generation]) -> pl.DataFrame:
    """The generation table: one row per sample, with a `failure` class for every failed one.

    Classes: too_long (no room for the answer), length (cut off at max_new_tokens),
    engine_error (the engine or its grammar failed), empty_output, missing (replay).
    """
    gen = pl.DataFrame(
        [{"sample_id": g.sample_id, "output": g.output, "finish_reason": g.finish_reason,
          "output_tokens": g.output_tokens, "error": g.error, "served_prompt_tokens": g.prompt_tokens}
         for g in generations],
        schema={"sample_id": pl.String, "output": pl.String, "finish_reason": pl.String,
                "output_tokens": pl.Int64, "error": pl.String, "served_prompt_tokens": pl.Int64})
    joined = prompts.drop("prompt", "prompt_token_ids", "chat_json", strict=False).join(
        gen, on="sample_id", how="left", maintain_order="left")
    # a prompt not tokenized here (engine=chat, remote-only model) is counted by the server
    joined = joined.with_columns(pl.coalesce("prompt_tokens", "served_prompt_tokens").alias("prompt_tokens")) \
        .drop("served_prompt_tokens")
    too_long = pl.col("failure") == TOO_LONG
    reason = pl.col("finish_reason")
    return joined.with_columns(
        pl.when(too_long).then(pl.lit(TOO_LONG)).otherwise(reason).alias("finish_reason"),
        pl.when(too_long).then(pl.lit(TOO_LONG))
        .when(reason == "error").then(pl.lit(ENGINE_ERROR))
        .when(reason.is_in(["length", "missing"])).then(reason)
        .when(pl.col("output").fill_null("").str.strip_chars() == "").then(pl.lit(EMPTY_OUTPUT))
        .otherwise(None).alias("failure"),
        pl.when(too_long)
        .then(pl.format("too_long: {} prompt tokens leave no room for the answer", pl.col("prompt_tokens")))
        .otherwise(pl.col("error")).alias("error"),
    )



class SingleCall:
    """Ask every sample once; its answer is the `output` column."""

    role = MODEL_ROLE

    def solve(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        cfg, generator = context.cfg, context.generator(self.role)
        with context.timer.phase("prompts"):
            marker("building prompts")
            tokenizer = generator.tokenizer
            plan = plan_prompts(cfg, context.benchmark, tokenizer)
            prompts = build_prompts(cfg, samples, tokenizer, generator.max_model_len, plan,
                                    render=generator.loads_model)
            prompts = answer_coverage(prompts, context.benchmark, plan)
            if generator.role.engine.sends_chat:
                prompts = attach_chats(prompts, plan, generator)
        context.facts["prompt"] = plan.facts()
        with context.timer.phase("generate"):
            generations = generator.generate(requests_for(prompts, cfg.decoding.constraint, plan))
        return read_calls(collect(prompts, generations), plan, tokenizer)

    def skip(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        raise ConfigError("the evaluated model's role cannot be switched off")


SOLVER = SingleCall()
