"""Server engine: the same requests sent to an OpenAI-compatible server (a vLLM server, say).

Prompts are rendered and tokenized here with the local tokenizer (model.path) and sent as token
ids to `/v1/completions`, so the server runs exactly the counted tokens; the constraint goes in
the request's structured-output field, as the configured backend would build it in-process.
The server chooses its backend for every request (its `--structured-outputs-config`), so it must
be started with the one decoding.constraint names. Connection errors, timeouts, 429 and 5xx
answers are retried with backoff a bounded number of times; whatever still fails is a row, never
a crash. Only the Python standard library is used; engine=chat (openai_chat.py) shares `_call`.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import MISSING

from inference.config import GeneratingEngineConfig
from inference.console import progress
from inference.engines import EngineContext, Generation, Request, request_seed
from inference.errors import EngineError
from inference.toolcalls import request_grammar

_BACKOFF_S = 0.5
# Busy, not wrong: a rate limit (429) is waited out like a 5xx; any other 4xx is the request's fault.
_RETRIED_4XX = (408, 429)


class ServerUnreachable(EngineError):
    """The server did not answer (connection refused, timeout, 429, 5xx) after the retries."""


def _call(base_url: str, path: str, body: dict[str, Any] | None, api_key: str | None, timeout_s: float,
          retries: int) -> Any:
    """One JSON request with bounded retries (exponential backoff) on connection errors, timeouts,
    429 and 5xx; another 4xx raises at once. No message it raises holds the API key."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    data = None if body is None else json.dumps(body).encode()
    last = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(_BACKOFF_S * 2 ** (attempt - 1))
        request = urllib.request.Request(base_url.rstrip("/") + path, data, headers,
                                         method="GET" if body is None else "POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as exc:
            text = _redacted(exc.read().decode(errors="replace")[:500], api_key)
            if exc.code < 500 and exc.code not in _RETRIED_4XX:
                raise EngineError(f"{base_url}{path} answered {exc.code}: {text}") from None
            last = f"{exc.code}: {text}"
            continue
        except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            last = _redacted(str(getattr(exc, "reason", exc)), api_key)
            continue
        try:
            return json.loads(raw or b"null")
        except ValueError:
            raise EngineError(f"{base_url}{path} answered with something other than JSON: "
                              f"{_redacted(raw[:200].decode(errors='replace'), api_key)!r}") from None
    raise ServerUnreachable(f"{base_url}{path} did not answer after {retries + 1} tries ({last}); is the server "
                            "up, and engine.base_url right (it ends in /v1)?")


def _redacted(text: str, api_key: str | None) -> str:
    """`text` without the key: a server may echo the request's headers in its error."""
    return text.replace(api_key, "[api key]") if api_key else text


def server_identity(base_url: str, api_key: str | None, model: str | None, timeout_s: float = 30) -> dict[str, Any]:
    """What the server says it serves (id, root, context): the model part of the cache key."""
    served = (_call(base_url, "/models", None, api_key, timeout_s, 2) or {}).get("data") or []
    listed = [m for m in served if model is None or m.get("id") == model]
    if len(listed) != 1:
        raise EngineError(f"engine.model must name one of the server's models {[m.get('id') for m in served]}, "
                          f"got {model!r}")
    found = listed[0]
    return {k: found.get(k) for k in ("id", "root", "max_model_len")}


class OpenAIEngine:
    """Requests to `engine.base_url` (`.../v1`), `engine.concurrency` at a time."""

    def __init__(self, *, base_url: str, api_key: str | None, model: str | None, constraint: str,
                 max_new_tokens: int, temperature: float, seed: int, concurrency: int, timeout_s: float,
                 retries: int) -> None:
        self._base, self._key, self._timeout, self._retries = base_url, api_key, timeout_s, retries
        self.identity = server_identity(base_url, api_key, model)
        self._model, self.constraint = self.identity["id"], constraint
        self.backend = f"{constraint} (server)" if constraint != "none" else "none"
        self._sampling = {"max_tokens": max_new_tokens, "temperature": temperature, "seed": seed}
        self._concurrency = concurrency

    @classmethod
    def from_config(cls, engine: Any, context: EngineContext) -> "OpenAIEngine":
        decoding = context.decoding
        return cls(base_url=engine.base_url, api_key=os.environ.get(engine.api_key_env) or None, model=engine.model,
                   constraint=decoding.constraint, max_new_tokens=decoding.max_new_tokens,
                   temperature=decoding.temperature, seed=decoding.seed, concurrency=engine.concurrency,
                   timeout_s=engine.timeout_s, retries=engine.retries)

    def generate(self, requests: list[Request]) -> list[Generation]:
        """One Generation per request, in order; a request that fails is an `error` row."""
        with ThreadPoolExecutor(max_workers=self._concurrency) as pool:
            done = pool.map(self._one, requests)
            return list(progress(done, "generating", len(requests), "prompt"))

    def _one(self, request: Request) -> Generation:
        body = {"model": self._model, "prompt": list(request.prompt_token_ids), "return_token_ids": True,
                **self._sampling, "seed": request_seed(self._sampling["seed"], request.sample_index)}
        structured = request_grammar(request, self.constraint)
        if structured is not None:
            body["structured_outputs"] = structured
        try:
            answer = _call(self._base, "/completions", body, self._key, self._timeout, self._retries)
        except EngineError as exc:
            return Generation(request.sample_id, None, "error", error=f"engine_error: {exc}"[:500])
        choice = answer["choices"][0]
        tokens = choice.get("token_ids")
        return Generation(request.sample_id, choice.get("text"), str(choice.get("finish_reason") or "error"),
                          output_tokens=len(tokens) if tokens is not None else answer.get("usage", {}).get(
                              "completion_tokens"))


@dataclass
class ServerEngineConfig(GeneratingEngineConfig):
    """What every engine that talks to an OpenAI-compatible server reads (engine=openai, engine=chat)."""

    base_url: str = MISSING
    """The server's OpenAI-compatible API, ending in /v1 (e.g. http://127.0.0.1:8000/v1)."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the API key (the key itself never enters config or run.json)."""
    model: Optional[str] = None
    """The served model's id (e.g. gpt-4o); None: the server's only model."""
    revision: str = ""
    """Your name for the weights behind the server (e.g. a checkpoint step): part of the cache key,
    with the server's model entry, so a server swapped to new weights does not reuse old generations."""
    concurrency: int = 8
    """Requests in flight at once (the server batches them)."""
    timeout_s: float = 600.0
    """Seconds one request may take."""
    retries: int = 3
    """Retries, with backoff, after a connection error, a timeout, a 408, 429 or 5xx answer."""

    needs_weights = False

    def problems(self) -> list[str]:
        found = super().problems()
        if not self.base_url.startswith(("http://", "https://")):
            found.append(f"engine.base_url must be an http(s) URL ending in /v1, got {self.base_url!r}")
        if self.concurrency < 1 or self.retries < 0:
            found.append(f"engine.concurrency must be >= 1 and engine.retries >= 0, got {self.concurrency}, "
                         f"{self.retries}")
        if self.timeout_s <= 0:
            found.append(f"engine.timeout_s must be > 0 seconds, got {self.timeout_s}")
        return found


@dataclass
class OpenAIEngineConfig(ServerEngineConfig):
    name: str = "openai"
    target: str = "inference.engines.openai_server:OpenAIEngine"

    def model_key(self) -> dict[str, Any]:
        return {"server": server_identity(self.base_url, os.environ.get(self.api_key_env) or None, self.model),
                "revision": self.revision}


CONFIG = OpenAIEngineConfig
"""The options this engine reads (conf/engine/openai.yaml is typed by it)."""
