"""Chat engine: the solver's chat sent to an OpenAI-compatible `/chat/completions` server (a vLLM
or SGLang server, llama.cpp's, TGI, Ollama, a lab gateway, OpenAI itself), for any model role.

What is sent. `messages` and `tools` from the request's `chat_json` (`Generator.render` builds it);
the server renders them with its own template. With `engine.local_template` (default) model.path's
tokenizer renders each chat here too, for token counts and the context check, and the chat is
adapted to that template as the in-process engine adapts it (toolsweep's tool block in the system
turn for a template that ignores tools=, a system turn folded into the user turn for one without a
system role), so a server running that template renders the in-process prompt; the tools go in
`tools` as built (OpenAI's `[{"type": "function", "function": {...}}]`), non-standard keys such as
a tool's `return` included (vLLM takes them, and its template renders what the local one rendered).
Without it (a remote-only model such as GPT-4o) nothing is rendered here, the chat goes as built,
the tools keep only OpenAI's function keys (name, description, parameters, strict: OpenAI refuses
others), and the counts are the server's `usage` (`Generation.prompt_tokens`).

Decoding: max_tokens, temperature, seed (`request_seed`; top_p where decoding has one). The server
applies the constraint: a JSON-schema answer (a judge's; a single-call answer in the benchmark's
format) goes as `response_format: {"type": "json_schema", ...}`, the schema bounded as the in-process
backend named by decoding.constraint bounds it; native tool calls (prompt.format=native) as
`tool_choice: "required"` with each tool `strict`, so that the server holds the call to the request's
tools and its arguments to the tool's schema, as the in-process grammar does (a vLLM server needs a
structured-output backend that forces calls, xgrammar or guidance: its outlines backend fails such a
request, and the error row names the server option). An agent turn's grammar
(one ReAct step as a regex, text-or-calls) has no chat-completions form: validation refuses it
(`decoding.constraint=none` is the fix) and a request that still carries one is an error row.

What comes back. The text is `choices[0].message.content`. The callers (an agent's call reader, the
single-call native parser) read calls from text, so native `tool_calls` are written back after the
content in the call wrapper of the model's family (the request's call_format, else model.tool_parser,
else Hermes): `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>` blocks, the arguments
decoded from their JSON string into an object (kept as the string when it is not JSON). Nothing
downstream changes, and `Generation.native_calls` records the calls as the server gave them. A
reply with neither content nor calls is "". Sent back in a later turn to a remote-only model, an
assistant turn holding such blocks goes as `tool_calls` with ids, answered by the `tool` messages
after it (OpenAI refuses a tool message that answers no call).

Concurrency, timeouts and retries (connection errors, timeouts, 429, 5xx, with backoff) are
openai_server's `_call`; a request that still fails is an `engine_error` row, never an exception.
The API key is read from `engine.api_key_env` when the engine is built and goes only into the
request header: never into the config, run.json, logs or error messages.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Optional


from inference.config import AGENT_TURN, GRAMMAR_ANSWER, DecodingConfig
from inference.console import marker, progress
from inference.engines import EngineContext, Generation, Request, request_seed
from inference.engines.openai_server import ServerEngineConfig, _call, server_identity
from inference.errors import EngineError
from inference.schemas import backend_schema
from inference.toolcalls import CALL_FORMATS, DEFAULT_PARSER, CallFormat

# The keys OpenAI's function object has; a remote-only model's tools keep only these.
_FUNCTION_KEYS = ("name", "description", "parameters", "strict")
# A chat server's reasons for a finished answer, in the callers' terms (stop | length | error).
_FINISH = {"tool_calls": "stop", "function_call": "stop"}


class UnsupportedConstraint(EngineError):
    """A request whose grammar a chat-completions server cannot apply."""


FORCED_CALL_HINT = ("a forced tool call (tool_choice=required) failed; a server whose structured-output backend "
                    "cannot force calls fails it (vLLM's outlines backend answers 500): start vLLM with "
                    "--structured-outputs-config '{\"backend\": \"xgrammar\"}' (or guidance), or set "
                    "decoding.constraint=none. The server said: ")
"""Leads the error row of a forced-call request the server failed: the server's own answer (vLLM's
is a bare "Internal server error") does not say which of its options fixes it."""


class ChatEngine:
    """Chats to `{engine.base_url}/chat/completions`, `engine.concurrency` at a time."""

    def __init__(self, *, base_url: str, api_key: str | None, model: str | None, constraint: str,
                 max_new_tokens: int, temperature: float, seed: int, concurrency: int, timeout_s: float,
                 retries: int, tool_parser: str | None = None, local_template: bool = True,
                 top_p: float | None = None) -> None:
        self._base, self._key, self._timeout, self._retries = base_url, api_key, timeout_s, retries
        self._model, self.constraint = model, constraint
        self.backend = "server (response_format / tool_choice)" if constraint != "none" else "none"
        self._sampling = {"max_tokens": max_new_tokens, "temperature": temperature,
                          **({"top_p": top_p} if top_p is not None else {})}
        self._seed, self._concurrency = seed, concurrency
        self._family, self._local = tool_parser or DEFAULT_PARSER, local_template

    @classmethod
    def from_config(cls, engine: Any, context: EngineContext) -> "ChatEngine":
        decoding = context.decoding
        return cls(base_url=engine.base_url, api_key=os.environ.get(engine.api_key_env) or None, model=engine.model,
                   constraint=decoding.constraint, max_new_tokens=decoding.max_new_tokens,
                   temperature=decoding.temperature, seed=decoding.seed, concurrency=engine.concurrency,
                   timeout_s=engine.timeout_s, retries=engine.retries, tool_parser=context.model.tool_parser,
                   local_template=engine.local_template, top_p=getattr(decoding, "top_p", None))

    def generate(self, requests: list[Request]) -> list[Generation]:
        """One Generation per request, in order; a request that fails is an `error` row."""
        with ThreadPoolExecutor(max_workers=self._concurrency) as pool:
            done = pool.map(self._one, requests)
            return list(progress(done, "generating", len(requests), "prompt"))

    def _one(self, request: Request) -> Generation:
        body: dict[str, Any] = {}
        try:
            body = self._body(request)
            answer = _call(self._base, "/chat/completions", body, self._key, self._timeout, self._retries)
            return self._read(request, answer)
        except UnsupportedConstraint as exc:
            return Generation(request.sample_id, None, "error", error=f"engine_error: {exc}"[:500])
        except EngineError as exc:
            hint = FORCED_CALL_HINT if body.get("tool_choice") == "required" else ""
            # the hint first: the server's own message may be long, and the row keeps 500 characters
            return Generation(request.sample_id, None, "error", error=f"engine_error: {hint}{exc}"[:500])

    def _body(self, request: Request) -> dict[str, Any]:
        if request.chat_json is None:
            raise EngineError("the request carries no chat (Request.chat_json): its solver builds requests without "
                              "Generator.render, so engine=chat cannot serve it; use engine=openai or vllm")
        chat = json.loads(request.chat_json)
        messages, tools = chat["messages"], chat.get("tools")
        if not self._local:
            messages = answered_calls(messages, self._format(request))
            tools = [_standard_tool(t) for t in tools] if tools else tools
        body: dict[str, Any] = {"messages": messages, **self._sampling,
                                "seed": request_seed(self._seed, request.sample_index)}
        if self._model is not None:  # vLLM and llama.cpp serve their one model without it
            body["model"] = self._model
        if tools:
            body["tools"] = tools
        body.update(self._constraint(request, tools))
        return body

    def _constraint(self, request: Request, tools: Optional[list[dict[str, Any]]]) -> dict[str, Any]:
        """The request fields that constrain the answer (none under decoding.constraint=none)."""
        if self.constraint == "none":
            return {}
        if request.grammar is not None:
            raise UnsupportedConstraint(f"decoding.constraint={self.constraint} asks for the benchmark's answer grammar, "
                                        "which a chat-completions server cannot apply; set decoding.constraint=none")
        if request.schema_json is None and request.regex is None:
            return {}
        if request.regex is not None or request.calls_optional:
            raise UnsupportedConstraint(
                f"decoding.constraint={self.constraint} asks for an agent turn's grammar (one ReAct step, or text or "
                "tool calls), which a chat-completions server cannot apply; set decoding.constraint=none")
        if request.call_format is not None:
            if not tools:
                raise UnsupportedConstraint("a native tool-call constraint needs the chat's tools, and this chat has "
                                            "none; set decoding.constraint=none")
            forced = {"tool_choice": "required", "tools": [_strict(t) for t in tools]}
            return {**forced, **({"parallel_tool_calls": False} if request.max_calls == 1 else {})}
        schema = json.loads(backend_schema(request.schema_json, self.constraint))
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": "answer", "schema": schema, "strict": True}}}

    def _read(self, request: Request, answer: Any) -> Generation:
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not choices or not isinstance(choices[0], dict):
            raise EngineError(f"the server's answer has no choices: {json.dumps(answer)[:300]}")
        choice, usage = choices[0], answer.get("usage") or {}
        message = choice.get("message") or {}
        calls = [_native_call(c) for c in message.get("tool_calls") or []]
        text = message.get("content") or ""
        if calls:
            text = with_calls(text, calls, self._format(request))
        reason = choice.get("finish_reason")
        return Generation(request.sample_id, text, _FINISH.get(reason, reason) or "stop",
                          output_tokens=usage.get("completion_tokens"), prompt_tokens=usage.get("prompt_tokens"),
                          native_calls=json.dumps(calls, ensure_ascii=False) if calls else None)

    def _format(self, request: Request) -> CallFormat:
        family = request.call_format or self._family
        if family not in CALL_FORMATS:
            raise EngineError(f"the server answered with native tool calls, and model.tool_parser={family} has no "
                              f"call format toolsweep can write them in (it writes {sorted(CALL_FORMATS)}); unset "
                              "model.tool_parser (Hermes) or pick one of those")
        return CALL_FORMATS[family]


def _native_call(call: dict[str, Any]) -> dict[str, Any]:
    """One of the server's tool calls as {"name", "arguments"}, the arguments decoded from JSON."""
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass  # not JSON: kept as the server wrote it, so the reader reports a malformed call
    return {"name": function.get("name"), "arguments": arguments if arguments is not None else {}}


def with_calls(content: str, calls: list[dict[str, Any]], fmt: CallFormat) -> str:
    """The content followed by the calls in the family's wrapper, as the model would have written them."""
    blocks = fmt.separator.join(
        fmt.prefix + json.dumps({"name": c["name"], fmt.args_key: c["arguments"]}, ensure_ascii=False) + fmt.suffix
        for c in calls)
    if not content:
        return blocks
    return content + ("" if content.endswith("\n") else "\n") + blocks


def answered_calls(messages: list[dict[str, Any]], fmt: CallFormat) -> list[dict[str, Any]]:
    """The chat as a strict server takes it: an assistant turn whose text holds wrapped calls, followed
    by one `tool` message per call, carries them as `tool_calls` with ids that the tool messages answer."""
    out = [dict(m) for m in messages]
    for index, message in enumerate(out):
        if message.get("role") != "assistant" or not fmt.suffix:  # an unterminated wrapper is not split here
            continue
        content, calls = _split_calls(message.get("content") or "", fmt)
        answers = out[index + 1:index + 1 + len(calls)]
        if not calls or len(answers) < len(calls) or any(a.get("role") != "tool" for a in answers):
            continue
        ids = [f"call_{index}_{k}" for k in range(len(calls))]
        message["content"] = content or None
        message["tool_calls"] = [{"id": i, "type": "function", "function": {
            "name": c["name"], "arguments": json.dumps(c.get(fmt.args_key, {}), ensure_ascii=False)}}
            for i, c in zip(ids, calls)]
        for answer, call_id in zip(answers, ids):
            answer["tool_call_id"] = call_id
    return out


def _split_calls(text: str, fmt: CallFormat) -> tuple[str, list[dict[str, Any]]]:
    """(the text before the first call, the calls); no calls where any block is not a JSON call."""
    blocks = re.findall(re.escape(fmt.prefix) + r"(.*?)" + re.escape(fmt.suffix), text, re.DOTALL)
    try:
        calls = [json.loads(b) for b in blocks]
    except ValueError:
        return text, []
    if not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls):
        return text, []
    return text[:text.find(fmt.prefix)].rstrip("\n") if calls else text, calls


def _strict(tool: dict[str, Any]) -> dict[str, Any]:
    """The tool with `strict: true`: a server then holds a forced call's arguments to the tool's
    parameter schema (vLLM pins argument schemas only for strict tools, or under its
    --tool-strict-level parameter), as the in-process grammar does; without it only the call's
    envelope and name are forced."""
    function = tool.get("function")
    if not isinstance(function, dict):
        return tool
    return {**tool, "function": {**function, "strict": True}}


def _standard_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or {}
    return {"type": "function", "function": {k: function[k] for k in _FUNCTION_KEYS if k in function}}


@dataclass
class ChatEngineConfig(ServerEngineConfig):
    name: str = "chat"
    target: str = "inference.engines.openai_chat:ChatEngine"
    local_template: bool = True
    """Render each chat here too with model.path's tokenizer and chat template (model.path needs both,
    not the weights): token counts, the context check, the chat adapted to that template as in-process.
    false: a remote-only model (GPT-4o): model.path is not read; the server's usage gives the counts."""

    sends_chat = True

    @property
    def renders_locally(self) -> bool:
        return self.local_template

    def constraint_problems(self, prefix: str, decoding: DecodingConfig, answers: str) -> list[str]:
        if decoding.constraint != "none" and answers == GRAMMAR_ANSWER:
            return [f"{prefix}engine=chat cannot apply {prefix}decoding.constraint={decoding.constraint} to the "
                    "benchmark's answer grammar (a chat-completions server constrains only a whole JSON answer, or "
                    f"forced tool calls); set {prefix}decoding.constraint=none, or use engine=openai or engine=vllm"]
        if decoding.constraint == "none" or answers != AGENT_TURN:
            return []
        return [f"{prefix}engine=chat cannot apply {prefix}decoding.constraint={decoding.constraint} to an agent's "
                "turns: their grammar (one ReAct step as a regex, or text or tool calls in the family's wrapper) has "
                "no chat-completions form (a server constrains only a whole JSON answer, or forced tool calls); set "
                f"{prefix}decoding.constraint=none, or use engine=openai or engine=vllm"]

    def model_key(self) -> dict[str, Any]:
        """The server's entry for the model and `revision`; the configured name alone where the server
        lists no such model (a gateway without /models; a server down: its requests become error rows)."""
        try:
            served = server_identity(self.base_url, os.environ.get(self.api_key_env) or None, self.model)
        except EngineError as exc:
            marker(f"engine=chat: {exc}; the cache key names the model by engine.model={self.model!r} alone")
            served = None
        return {"server": served, "model": self.model, "revision": self.revision}


CONFIG = ChatEngineConfig
"""The options this engine reads (conf/engine/chat.yaml is typed by it)."""
