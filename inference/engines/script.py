"""Scripted model calls: a multi-turn benchmark's loop driven from a file, no model (engine=script).

Rows (JSONL) `{"sample_id", "turn", "text"}`: `text` is the raw model output of the case's
`turn`-th model call, counted from 0 across all its user turns, returned as is (read exactly as
a model's would be, so every parsing rule is testable without one; `output` is its older name).
Under `decoding.samples=k` a row's `sample_index` (0..k-1, default 0) says which of the record's
k episodes it scripts, as engine=replay's rows do. A request is named `"{sample_id}@{k}"`: the
run's sample id (`{record}#{i}` under k > 1, inference.repeats) and the call's index. A call
with no row gets empty text. A benchmark may declare shorthand rows (`Benchmark.script_turn`, an
agent benchmark's `calls` and `answer`): its writer writes their text, and that of a call with no row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from omegaconf import MISSING

from grading.listing import list_first

from inference.config import EngineConfig
from inference.engines import EngineContext, Generation, Request
from inference.errors import DatasetError, EngineError
from inference.repeats import sample_key

Writer = Callable[[dict[str, Any], str], str]
"""(a shorthand row, or {} for a call with no row; its sample id) -> the model output it stands for."""
_OWN_KEYS = ("sample_id", "turn", "sample_index")
_TEXT_KEYS = ("text", "output")


@dataclass
class ScriptEngineConfig(EngineConfig):
    """engine=script: a case's model calls read from a file (conf/engine/script.yaml)."""

    name: str = "script"
    target: str = "inference.engines.script:ScriptEngine"
    script: str = MISSING
    """JSONL of model calls, no model: {"sample_id", "turn", "text"}, `turn` the case's model call
    from 0 (plus `sample_index` under decoding.samples > 1, and the benchmark's shorthand rows)."""

    answers = "turns"

    def problems(self) -> list[str]:
        found = super().problems()
        if not Path(self.script).expanduser().is_file():
            found.append(f"engine.script {self.script!r} is not a file (JSONL of {{sample_id, turn, text}} rows)")
        return found


CONFIG = ScriptEngineConfig


class ScriptEngine:
    """Answers each request with its scripted text; never fails a request."""

    backend = "none"

    def __init__(self, script: str, samples: int = 1, write: Optional[Writer] = None) -> None:
        self.write = write
        self.texts = read_script(Path(script).expanduser(), samples, write)

    @classmethod
    def from_config(cls, engine: Any, context: EngineContext) -> "ScriptEngine":
        return cls(engine.script, context.decoding.samples, getattr(context.benchmark, "script_turn", None))

    def generate(self, requests: list[Request]) -> list[Generation]:
        return [Generation(r.sample_id, self._text(r.sample_id), "stop", 0) for r in requests]

    def _text(self, request_id: str) -> str:
        sample_id, at, call = request_id.rpartition("@")
        if not at or not call.isdigit():
            raise EngineError(f"engine=script answers requests named '{{sample_id}}@{{k}}' (k: the case's model "
                              f"call, from 0), got {request_id!r}: the benchmark's solver must name them so")
        text = self.texts.get((sample_id, int(call)))
        if text is None:
            return self.write({}, sample_id) if self.write else ""
        return text


def read_script(path: Path, samples: int = 1, write: Optional[Writer] = None) -> dict[tuple[str, int], str]:
    """{(the run's sample id, model call): text}; a DatasetError names every bad line."""
    if not path.is_file():
        raise DatasetError(f"engine.script {str(path)!r} is not a file")
    texts, lines, problems = {}, {}, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key, text = _key(row, samples), _text(row, write)
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: malformed JSON ({exc.msg})")
            continue
        except DatasetError as exc:
            problems.append(f"line {number}: {exc}")
            continue
        if key in lines:
            problems.append(f"line {number}: line {lines[key]} already scripts this call ({key[0]!r}, turn {key[1]})")
            continue
        texts[key], lines[key] = text, number
    if problems:
        raise DatasetError(f"{len(problems)} bad row(s) in engine.script {path}:\n  " + list_first(problems, 40, "\n  ")
                           + '\nEach row is {"sample_id", "turn", "text"}: `turn` counts the case\'s model calls '
                           'from 0, `text` is the raw model output; `sample_index` picks the episode under '
                           'decoding.samples > 1.')
    return texts


def _key(row: Any, samples: int) -> tuple[str, int]:
    """The row's call: the run's sample id (with its sample index, inference.repeats) and `turn`."""
    if not isinstance(row, dict) or not isinstance(row.get("sample_id"), str) or type(row.get("turn")) is not int:
        raise DatasetError("needs a string sample_id and an integer turn (the case's model call, from 0)")
    if row["turn"] < 0:
        raise DatasetError(f"turn must be >= 0 (a case's model calls count from 0), got {row['turn']}")
    index = row.get("sample_index", 0)
    if type(index) is not int:
        raise DatasetError(f"sample_index must be an integer, got {index!r}")
    if not 0 <= index < samples:
        raise DatasetError(f"sample_index {index} is outside 0..{samples - 1}: this run asks for "
                           f"decoding.samples={samples} per record; set decoding.samples to the script's "
                           "episodes per record, or drop the row")
    return sample_key(row["sample_id"], index, samples), row["turn"]


def _text(row: dict[str, Any], write: Optional[Writer]) -> str:
    """The row's raw `text`, or the benchmark's writing of its shorthand."""
    given = [k for k in _TEXT_KEYS if k in row]
    if len(given) > 1:
        raise DatasetError("holds both text and output: keep only one of them (`output` is text's older name)")
    if not given:
        if write is None:
            raise DatasetError("needs text (the raw model output): this benchmark declares no shorthand rows")
        return write(row, row["sample_id"])
    extra = sorted(set(row) - {*_OWN_KEYS, given[0]})
    if extra:
        raise DatasetError(f"holds {extra} beside {given[0]}: a row is either the raw model output or the "
                           "benchmark's shorthand")
    if not isinstance(row[given[0]], str):
        raise DatasetError(f"{given[0]} must be a string (the raw model output), got {row[given[0]]!r}")
    return row[given[0]]
