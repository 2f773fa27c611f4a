"""The prompt pipeline (Polars): sample table -> rendered chat prompts, token ids, schemas.

One row per sample, rendered by the model's own chat template. In the benchmark format the
sample's `system` turn already embeds the context and the candidate tools; in the native
format the `native_system` turn carries the context and the tools go to the template
(`tools=`), or, for a template that ignores them, into a tool block in the system turn.
Nothing is truncated silently: a prompt that leaves no room for the answer is a `too_long`
row unless `drop_oldest_history` is set and the benchmark declares how to shorten its prompts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import polars as pl

from inference.console import progress
from inference.failures import TOO_LONG
from inference.schemas import backend_schema, call_schema, cap_strings, compact_json, schema_id
from inference.toolcalls import CallFormat, native_call_schema, tool_block

_SYSTEM_PROBE, _USER_PROBE = "<<toolsweep-system>>", "<<toolsweep-user>>"
_TOOL_PROBE = "toolsweep_probe_tool"


@dataclass(frozen=True)
class PromptSettings:
    max_model_len: int
    """Context length of the model: prompt tokens + max_new_tokens must fit."""
    max_new_tokens: int
    shorten: Callable[[str, int], str | None] | None = None
    """decoding.drop_oldest_history: the benchmark's `shorten` (its system turn with the oldest
    history items dropped); None: a prompt that does not fit is a too_long row."""
    native: bool = False
    """Render in the native format (tools to the chat template)."""
    template_tools: bool = True
    """native: the template renders `tools=`; False puts a tool block in the system turn instead."""


def template_has_tools(tokenizer: Any) -> bool:
    """Whether the chat template renders the `tools=` it is given (many small models' ignore them)."""
    probe = [{"type": "function", "function": {"name": _TOOL_PROBE, "description": "",
                                               "parameters": {"type": "object", "properties": {}}}}]
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": _USER_PROBE}], tools=probe,
                                             tokenize=False, add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - jinja templates raise their own exception types
        return False
    return _TOOL_PROBE in text


def template_has_system(tokenizer: Any) -> bool:
    """Whether the chat template renders a system turn (some raise, some drop it silently)."""
    messages = [{"role": "system", "content": _SYSTEM_PROBE}, {"role": "user", "content": _USER_PROBE}]
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - jinja templates raise their own exception types
        return False
    return _SYSTEM_PROBE in text


def render_chat(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, fold: bool,
                template_tools: bool) -> str:
    """A chat's prompt text as the model's own template renders it: tools go to `tools=`, or,
    for a template that ignores them, into a tool block in the system turn; a template without
    a system role gets the system text at the head of the first user turn."""
    messages = [dict(m) for m in messages]
    if tools is not None and not template_tools:
        block = tool_block(tools)
        if messages and messages[0]["role"] == "system":
            messages[0]["content"] = f"{messages[0]['content']}\n\n{block}"
        else:
            messages.insert(0, {"role": "system", "content": block})
        tools = None
    if fold and messages and messages[0]["role"] == "system" and len(messages) > 1:
        system = messages.pop(0)["content"]
        messages[0]["content"] = f"{system}\n\n{messages[0]['content']}"
    return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)


def chat_messages(row: dict[str, Any], native: bool) -> list[dict[str, Any]]:
    """A sample's messages: its system turn (the benchmark format's, or the native one where it has
    one), the chat's earlier turns (`prior_turns`, where the benchmark has them), the user turn."""
    system = row["native_system"] if native else row["system"]
    earlier = json.loads(row["prior_turns"]) if row.get("prior_turns") else []
    # the benchmark format always has its system turn; the native one only where it has text
    return [*([{"role": "system", "content": system}] if system or not native else []), *earlier,
            {"role": "user", "content": row["user"]}]


def render_one(row: dict[str, Any], tokenizer: Any, fold: bool, settings: PromptSettings) -> str:
    """One sample's prompt text, as the model's chat template renders it."""
    if not settings.native:
        return render_chat(tokenizer, chat_messages(row, False), None, fold, True)
    return render_chat(tokenizer, chat_messages(row, True), json.loads(row["tool_specs"]), fold,
                       settings.template_tools)


def render_prompts(samples: pl.DataFrame, tokenizer: Any, settings: PromptSettings) -> pl.DataFrame:
    """Add `prompt`, `prompt_token_ids`, `prompt_tokens`, `history_dropped` and `failure`."""
    fold = not template_has_system(tokenizer)
    budget = settings.max_model_len - settings.max_new_tokens
    columns = ["system", "native_system", "tool_specs", "user", *(["prior_turns"] if "prior_turns" in samples.columns else [])]
    rows = samples.select(columns).iter_rows(named=True)
    texts = [render_one(r, tokenizer, fold, settings)
             for r in progress(rows, "building prompts", samples.height, "prompt")]
    rendered = samples.with_columns(pl.Series("prompt", texts, dtype=pl.String))
    ids = _tokenize(tokenizer, rendered.get_column("prompt").to_list())
    rendered = rendered.with_columns(
        pl.Series("prompt_token_ids", ids, dtype=pl.List(pl.Int32)),
        pl.Series("prompt_tokens", [len(i) for i in ids], dtype=pl.Int64),
        pl.lit(0, dtype=pl.Int64).alias("history_dropped"),
    )
    if settings.shorten is not None:
        rendered = _shorten(rendered, tokenizer, fold, budget, settings)
    return rendered.with_columns(
        pl.when(pl.col("prompt_tokens") > budget).then(pl.lit(TOO_LONG)).otherwise(None)
        .cast(pl.String).alias("failure"))


def _tokenize(tokenizer: Any, prompts: list[str]) -> list[list[int]]:
    # The rendered template already holds its special tokens; adding them again would
    # double the BOS token on templates that start with one.
    return tokenizer(prompts, add_special_tokens=False)["input_ids"]


def _shorten(frame: pl.DataFrame, tokenizer: Any, fold: bool, budget: int, settings: PromptSettings) -> pl.DataFrame:
    column = "native_system" if settings.native else "system"
    rows = frame.to_dicts()
    for row in rows:
        dropped = 0
        while row["prompt_tokens"] > budget:
            system = settings.shorten(row[column] or "", dropped + 1)
            if system is None:
                break
            dropped += 1
            row["prompt"] = render_one({**row, column: system}, tokenizer, fold, settings)
            row["prompt_token_ids"] = _tokenize(tokenizer, [row["prompt"]])[0]
            row["prompt_tokens"], row["history_dropped"] = len(row["prompt_token_ids"]), dropped
    return pl.DataFrame(rows, schema=frame.schema)


def attach_schemas(samples: pl.DataFrame, constraint: str, max_string_chars: int | None = None,
                   native: CallFormat | None = None) -> pl.DataFrame:
    """Add `schema_json` (order kept), `schema_id` and `gold_in_schema`, one build per candidate set.

    In the native format the schema is of one call in the family's keys (`name`, `arguments`);
    the engine adds the family's wrapper. A forced call cannot refuse, so there a gold refusal
    is outside the constrained answers (free decoding can still refuse by not calling)."""
    distinct = samples.select("tools", "allow_refusal").unique(maintain_order=True)
    built = [_schema_row(*row, max_string_chars, native) for row in distinct.iter_rows()]
    table = distinct.with_columns(
        pl.Series("schema_json", [b[0] for b in built], dtype=pl.String),
        pl.Series("schema_id", [b[1] for b in built], dtype=pl.String))
    joined = samples.join(table, on=["tools", "allow_refusal"], how="left", maintain_order="left")
    backend = "outlines" if constraint == "none" else constraint
    # The settings of one record share schema and gold: validate each distinct pair once.
    checks = joined.select("schema_json", "gold_tool", "gold_params").unique(maintain_order=True)
    fits = {row: gold_fits(*row, backend, native) for row in checks.iter_rows()}
    covered = [fits[row] for row in joined.select("schema_json", "gold_tool", "gold_params").iter_rows()]
    return joined.with_columns(pl.Series("gold_in_schema", covered, dtype=pl.Boolean))


def _schema_row(tools_json: str, allow_refusal: bool, max_string_chars: int | None,
                native: CallFormat | None) -> tuple[str | None, str | None]:
    tools = json.loads(tools_json)
    if not tools and (native is not None or not allow_refusal):
        return None, None  # no tool to call: no call schema, the answer is decoded freely
    schema = call_schema(tools, allow_refusal) if native is None else native_call_schema(tools, native)
    schema = cap_strings(schema, max_string_chars)
    return compact_json(schema), schema_id(schema)


def gold_fits(schema_json: str | None, gold_tool: str | None, gold_params: str, backend: str,
              native: CallFormat | None = None) -> bool:
    """Whether the gold call is valid under the schema, with `backend`'s value bounds (False
    without a schema: a sample with no tools)."""
    if schema_json is None:
        return False
    if native is not None:
        if gold_tool is None:
            return False
        call = {"name": gold_tool, native.args_key: json.loads(gold_params)}
    else:
        call = {"tool_name": gold_tool, "parameters": json.loads(gold_params)}
    return _validator(schema_json, backend).is_valid(call)


@lru_cache(maxsize=1024)
def _validator(schema_json: str, backend: str) -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(json.loads(backend_schema(schema_json, backend)))
