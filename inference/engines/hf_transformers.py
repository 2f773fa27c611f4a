"""transformers engine: Hugging Face `generate`, constrained through the `outlines` library.

For machines without vLLM. One prompt at a time (no batching). The constraint is the same
compact regex the vLLM engine builds for outlines (in the native format with the family's
wrapper), compiled by the chosen backend (outlines_core, xgrammar or llguidance).
"""

from __future__ import annotations

import re
from typing import Any

from inference.console import progress
from inference.engines import EngineContext, Generation, Request, request_seed
from inference.errors import EngineError
from inference.toolcalls import request_grammar
from inference.config import TransformersEngineConfig

# decoding.constraint -> the outlines library's name for its grammar backend
_OUTLINES_BACKENDS = {"outlines": "outlines_core", "xgrammar": "xgrammar", "guidance": "llguidance"}


class TransformersEngine:
    """A local model folder loaded with transformers, on the GPU when there is one."""

    def __init__(self, *, model_path: str, constraint: str, dtype: str, max_new_tokens: int,
                 temperature: float, seed: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.backend = constraint
        self._constraint, self._max_new_tokens = constraint, max_new_tokens
        self._temperature, self._seed = temperature, seed
        self._device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_path)
            self.model = AutoModelForCausalLM.from_pretrained(
                model_path, dtype="auto" if dtype == "auto" else getattr(torch, dtype)
            ).to(self._device).eval()
        except Exception as exc:  # noqa: BLE001 - transformers raises many types
            raise EngineError(f"transformers could not load model.path={model_path!r}: "
                              f"{type(exc).__name__}: {exc}") from exc
        self._generators: dict[str, Any] = {}

    @classmethod
    def from_config(cls, engine: Any, context: EngineContext) -> "TransformersEngine":
        return cls(model_path=context.model.path, constraint=context.decoding.constraint, dtype=context.model.dtype,
                   max_new_tokens=context.decoding.max_new_tokens, temperature=context.decoding.temperature,
                   seed=context.decoding.seed)

    def generate(self, requests: list[Request]) -> list[Generation]:
        """Generate each request; a failing sample becomes an `error` row."""
        results = []
        for request in progress(requests, "generating", len(requests), "prompt"):
            try:
                results.append(self._generate_one(request))
            except Exception as exc:  # noqa: BLE001 - a failed sample is a row
                results.append(Generation(request.sample_id, None, "error",
                                          error=f"{type(exc).__name__}: {exc}"[:500]))
        return results

    def _generate_one(self, request: Request) -> Generation:
        if self._temperature > 0:  # seeded per request: a sample does not depend on what ran before it
            import torch

            torch.manual_seed(request_seed(self._seed, request.sample_index))
        if self._constraint == "none" or request_grammar(request, "outlines") is None:
            return self._free(request)
        regex = _regex(request)
        with self._eager():
            text = self._generator(regex)(request.prompt, max_new_tokens=self._max_new_tokens, **self._sampling())
        tokens = len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return Generation(request.sample_id, text, _constrained_finish(regex, text, tokens, self._max_new_tokens),
                          tokens)

    def _eager(self) -> Any:
        """On the CPU, the constraint's torch.compile'd code runs as written: outlines_core's mask
        kernel otherwise compiles a C++ graph with inductor before the first constrained token of
        every process (about 10 s of g++ and tracing here) to save microseconds a token."""
        import contextlib

        import torch

        return torch.compiler.set_stance("force_eager") if self._device == "cpu" else contextlib.nullcontext()

    def _sampling(self) -> dict[str, Any]:
        if self._temperature == 0:
            return {"do_sample": False}
        return {"do_sample": True, "temperature": self._temperature}

    def _free(self, request: Request) -> Generation:
        import torch

        ids = torch.tensor([list(request.prompt_token_ids)], device=self._device)
        with torch.no_grad():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids),
                                      max_new_tokens=self._max_new_tokens,
                                      pad_token_id=self.tokenizer.eos_token_id, **self._sampling())
        new = out[0, ids.shape[1]:].tolist()
        ended = bool(new) and new[-1] in _eos_ids(self.model, self.tokenizer)
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        return Generation(request.sample_id, text, "stop" if ended or len(new) < self._max_new_tokens
                          else "length", len(new))

    def _generator(self, regex: str) -> Any:
        if regex not in self._generators:
            import outlines
            from outlines.types import Regex

            model = outlines.from_transformers(self.model, self.tokenizer)
            self._generators[regex] = outlines.Generator(
                model, Regex(regex), backend=_OUTLINES_BACKENDS[self._constraint])
        return self._generators[regex]


def _constrained_finish(regex: str, text: str, tokens: int, max_new_tokens: int) -> str:
    """`stop` when the answer is a whole match of its grammar, `length` when it was cut. Counting
    the text's tokens again cannot tell: a cut answer often re-tokenizes into fewer tokens than
    were generated (a 48-token cut string read back as 41 and passed for finished)."""
    try:
        return "stop" if re.fullmatch(regex, text) else "length"
    except re.error:  # a construct Python's re lacks: fall back to the count
        return "length" if tokens >= max_new_tokens else "stop"


def _regex(request: Request) -> str:
    # The regex vLLM's outlines path gets; the chosen backend compiles it here.
    return request_grammar(request, "outlines")["regex"]


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    eos = getattr(model.generation_config, "eos_token_id", None)
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


CONFIG = TransformersEngineConfig
"""The options this engine reads (conf/engine/transformers.yaml is typed by it)."""
