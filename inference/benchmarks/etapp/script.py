"""ETAPP's shorthand rows for engine=script (inference/engines/script.py): `Benchmark.script_turn`.

Besides a raw `text` row, an ETAPP script may hold `{"sample_id", "turn", "calls": [{"name",
"arguments"}]}` or `{"sample_id", "turn", "answer"}`. The method (the middle part of an ETAPP
sample id, `tool_given/react/John_Doe-1`) decides how they are written: Hermes `<tool_call>`
blocks for fc, a Thought / Action / Action Input step for react and e_react. A model call with no
row gives the final answer "" (so a script ends its cases where it stops).
"""

from __future__ import annotations

from typing import Any

from inference.errors import DatasetError


def script_turn(row: dict[str, Any], sample_id: str) -> str:
    """The text of a `calls` or `answer` row ({}: a call the script has no row for, the final answer "")."""
    if row:
        problem = _row_problem(row)
        if problem:
            raise DatasetError(problem)
    return write_turn(row or {"answer": ""}, method_of(sample_id))


def method_of(sample_id: str) -> str:
    parts = sample_id.split("/")
    return parts[1] if len(parts) == 3 else "fc"


def write_turn(row: dict[str, Any], method: str) -> str:
    """The text a model of `method` would have written for a `calls` or `answer` row."""
    if "calls" in row:
        if method == "fc":
            return "\n".join(f"<tool_call>\n{repr({'name': c['name'], 'arguments': c.get('arguments', {})})}\n"
                             "</tool_call>" for c in row["calls"])
        call = row["calls"][0]
        return (f"Thought: I will call {call['name']}.\nAction: {call['name']}\n"
                f"Action Input: {repr(call.get('arguments', {}))}")
    answer = str(row.get("answer", ""))
    return answer if method == "fc" else f"Thought: I now know the final answer\nFinal Answer: {answer}"


def _row_problem(row: dict[str, Any]) -> str | None:
    if sum(k in row for k in ("calls", "answer")) != 1:
        return ("needs exactly one of text (the raw model output; `output` is its older name), "
                "calls [{name, arguments}] or answer")
    if "calls" in row and not (isinstance(row["calls"], list) and row["calls"]
                               and all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in row["calls"])):
        return "calls must be a non-empty list of {name, arguments}"
    return None
