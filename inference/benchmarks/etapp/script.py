"""A scripted agent for ETAPP: the agent's turns read from a file, no model (engine=script).

Rows (JSONL): `{"sample_id", "turn", "calls": [{"name", "arguments"}]}`, `{"sample_id", "turn",
"answer"}` or `{"sample_id", "turn", "text"}` (the raw model output for that turn, read exactly as a
model's would be: every parsing rule is testable without a model; `output` is its older name).
Requests carry `"{sample_id}@{turn}"`; the method (the middle part of an ETAPP sample id,
`tool_given/react/John_Doe-1`) decides how calls and answers are written: Hermes `<tool_call>`
blocks for fc, a Thought / Action / Action Input step for react and e_react. A turn with no row
gives the final answer "" (so a script ends its cases where it stops).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from grading.listing import list_first

from inference.config import EngineConfig
from inference.engines import EngineContext, Generation, Request
from inference.errors import DatasetError


@dataclass
class ScriptEngineConfig(EngineConfig):
    """engine=script: ETAPP's agent turns read from a file (conf/engine/script.yaml)."""

    name: str = "script"
    target: str = "inference.benchmarks.etapp.script:ScriptEngine"
    script: str = MISSING
    """JSONL of an agent's turns, no model: {"sample_id", "turn", "calls": [{"name", "arguments"}]}
    or {"sample_id", "turn", "answer"}."""

    answers = "turns"

    def problems(self) -> list[str]:
        found = super().problems()
        if not Path(self.script).expanduser().is_file():
            found.append(f"engine.script {self.script!r} is not a file (JSONL of {{sample_id, turn, calls | "
                         "answer}} rows)")
        return found


CONFIG = ScriptEngineConfig


class ScriptEngine:
    backend = "none"

    def __init__(self, script: str) -> None:
        self.turns = read_script(Path(script).expanduser())
        self.missing: list[str] = []

    @classmethod
    def from_config(cls, engine: Any, context: EngineContext) -> "ScriptEngine":
        return cls(engine.script)

    def generate(self, requests: list[Request]) -> list[Generation]:
        return [self._one(r) for r in requests]

    def _one(self, request: Request) -> Generation:
        sample_id, _, turn = request.sample_id.rpartition("@")
        row = self.turns.get((sample_id, int(turn)), {"answer": ""})
        return Generation(request.sample_id, write_turn(row, method_of(sample_id)), "stop", 0)


def method_of(sample_id: str) -> str:
    parts = sample_id.split("/")
    return parts[1] if len(parts) == 3 else "fc"


def write_turn(row: dict[str, Any], method: str) -> str:
    """The text a model of `method` would have written for a scripted row."""
    for key in ("text", "output"):  # the model's raw text for the turn, read as a model's would be
        if key in row:
            return row[key]
    if "calls" in row:
        if method == "fc":
            return "\n".join(f"<tool_call>\n{repr({'name': c['name'], 'arguments': c.get('arguments', {})})}\n"
                             "</tool_call>" for c in row["calls"])
        call = row["calls"][0]
        return (f"Thought: I will call {call['name']}.\nAction: {call['name']}\n"
                f"Action Input: {repr(call.get('arguments', {}))}")
    answer = str(row.get("answer", ""))
    return answer if method == "fc" else f"Thought: I now know the final answer\nFinal Answer: {answer}"


def read_script(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """{(sample_id, turn): row}; a DatasetError names every bad line."""
    if not path.is_file():
        raise DatasetError(f"engine.script {str(path)!r} is not a file")
    turns, problems = {}, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: malformed JSON ({exc.msg})")
            continue
        problem = _row_problem(row)
        if problem:
            problems.append(f"line {number}: {problem}")
        else:
            turns[(row["sample_id"], int(row["turn"]))] = row
    if problems:
        raise DatasetError(f"{len(problems)} bad row(s) in engine.script {path}:\n  " + list_first(problems, 40, "\n  ")
                           + '\nEach row is {"sample_id", "turn", "calls": [{"name", "arguments"}]} or '
                           '{"sample_id", "turn", "answer"}.')
    return turns


def _row_problem(row: Any) -> str | None:
    if not isinstance(row, dict) or not isinstance(row.get("sample_id"), str) or not isinstance(row.get("turn"), int):
        return "needs a string sample_id and an integer turn"
    if sum(k in row for k in ("calls", "answer", "text", "output")) != 1:
        return "needs exactly one of calls, answer, text (a raw model output; `output` is its older name)"
    if "calls" in row and not (isinstance(row["calls"], list) and row["calls"]
                               and all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in row["calls"])):
        return "calls must be a non-empty list of {name, arguments}"
    return None
