"""Engines turn prompts into outputs. Each takes the same requests and returns the same records.

Only `vllm_offline.py` imports vllm, and only when that engine is chosen, so the rest of
toolsweep (and all of grading) runs where vllm is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol


@dataclass(frozen=True)
class Request:
    """One prompt to generate for, with the constraint for its answer."""

    sample_id: str
    prompt: str
    """The rendered chat prompt (text), for engines that tokenize themselves."""
    prompt_token_ids: tuple[int, ...]
    """The same prompt as token ids: what vLLM is given, so counts match exactly."""
    schema_json: Optional[str]
    """The call schema (order kept), or None for free decoding."""


@dataclass(frozen=True)
class Generation:
    """What an engine produced for one request; a failed request is a record, not an exception."""

    sample_id: str
    output: Optional[str]
    finish_reason: str
    """stop | length | error | missing (replay)."""
    output_tokens: Optional[int] = None
    error: Optional[str] = None
    """Error class and message when the engine failed on this sample."""


class Engine(Protocol):
    """The interface every engine implements."""

    backend: str
    """The structured-output backend that really ran ("none" for free decoding)."""

    def generate(self, requests: list[Request]) -> list[Generation]:
        """One Generation per request, in request order."""
        ...
