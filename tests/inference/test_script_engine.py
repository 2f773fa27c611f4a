"""engine=script on its own: the k-th model call of a case reads its k-th row, whatever the
benchmark; a benchmark's shorthand rows go through the writer it declares. No model, no data."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from inference.benchmarks import get_benchmark
from inference.engines import EngineContext, Request
from inference.engines.script import CONFIG, ScriptEngine
from inference.errors import DatasetError


def script(tmp_path: Path, *rows: dict | str) -> str:
    path = tmp_path / "script.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def engine(path: str, samples: int = 1, benchmark: object = None) -> ScriptEngine:
    context = EngineContext(model=None, decoding=SimpleNamespace(samples=samples), max_model_len=None,
                            sample_ids=[], benchmark=benchmark)
    return ScriptEngine.from_config(CONFIG(script=path), context)


def texts(scripted: ScriptEngine, *ids: str, sample_index: int = 0) -> list[str | None]:
    requests = [Request(sample_id=i, prompt="", prompt_token_ids=(), schema_json=None, sample_index=sample_index)
                for i in ids]
    return [g.output for g in scripted.generate(requests)]


def test_the_kth_model_call_of_a_case_reads_its_kth_row(tmp_path):
    path = script(tmp_path, *({"sample_id": "multi_turn_base_0", "turn": k, "text": f"call {k}"} for k in range(3)),
                  {"sample_id": "multi_turn_base_1", "turn": 0, "output": "older name"})
    assert texts(engine(path), "multi_turn_base_0@2", "multi_turn_base_0@0", "multi_turn_base_0@1",
                 "multi_turn_base_1@0") == ["call 2", "call 0", "call 1", "older name"]


def test_a_call_with_no_row_gets_empty_text(tmp_path):
    path = script(tmp_path, {"sample_id": "case-1", "turn": 0, "text": "first"})
    assert texts(engine(path), "case-1@1", "case-2@0") == ["", ""]


def test_sample_index_picks_the_row_of_that_episode(tmp_path):
    path = script(tmp_path, {"sample_id": "case-1", "turn": 0, "text": "sample 0"},
                  {"sample_id": "case-1", "sample_index": 1, "turn": 0, "text": "sample 1"})
    scripted = engine(path, samples=2)
    assert texts(scripted, "case-1#0@0") == ["sample 0"]
    assert texts(scripted, "case-1#1@0", sample_index=1) == ["sample 1"]


def test_a_sample_index_the_run_does_not_ask_for_is_refused(tmp_path):
    path = script(tmp_path, {"sample_id": "case-1", "turn": 0, "text": "a"},
                  {"sample_id": "case-1", "sample_index": 1, "turn": 0, "text": "b"})
    with pytest.raises(DatasetError, match=r"line 2: sample_index 1 is outside 0\.\.0.*decoding\.samples=1"):
        engine(path)


@pytest.mark.parametrize("row, problem", [
    ("{not json", "malformed JSON"),                                                    # a broken line
    ({"sample_id": "c", "text": "x"}, "needs a string sample_id and an integer turn"),  # no turn
    ({"sample_id": "c", "turn": -1, "text": "x"}, "turn must be >= 0"),                 # calls count from 0
    ({"sample_id": "c", "turn": 0, "text": None}, "text must be a string"),             # null output
    ({"sample_id": "c", "turn": 0, "text": "x", "output": "y"}, "only one of"),         # which one?
    ({"sample_id": "c", "turn": 0, "text": "x", "answer": "y"}, "beside text"),         # shorthand and text
    ({"sample_id": "c", "turn": 0, "answer": "y"}, "needs text"),                       # no writer declared
    ({"sample_id": "c", "turn": 0, "sample_index": "0", "text": "x"}, "sample_index"),  # not an integer
    ({"sample_id": "a", "turn": 0, "text": "again"}, "line 1 already scripts"),         # a duplicate
])
def test_a_bad_row_is_refused_with_its_line(tmp_path, row, problem):
    path = script(tmp_path, {"sample_id": "a", "turn": 0, "text": "x"}, "", row)
    with pytest.raises(DatasetError, match="line 3: .*" + problem):
        engine(path)


def test_every_bad_row_is_listed_at_once(tmp_path):
    path = script(tmp_path, "{", {"sample_id": "c", "turn": 0, "text": "x"}, {"sample_id": "c", "turn": 0})
    with pytest.raises(DatasetError, match=r"2 bad row\(s\)") as err:
        engine(path)
    assert "line 1:" in str(err.value) and "line 3:" in str(err.value) and "line 2:" not in str(err.value)


def test_shorthand_rows_are_written_by_the_benchmark_it_declares(tmp_path):
    def writer(row: dict, sample_id: str) -> str:
        if row and "say" not in row:
            raise DatasetError("needs say")
        return f"{sample_id}: {row.get('say', 'stop')}"

    bench = SimpleNamespace(script_turn=writer)
    scripted = engine(script(tmp_path, {"sample_id": "c", "turn": 0, "say": "hi"}), benchmark=bench)
    assert texts(scripted, "c@0", "c@1") == ["c: hi", "c: stop"]  # a call with no row: the writer's {}
    with pytest.raises(DatasetError, match="line 1: needs say"):
        engine(script(tmp_path, {"sample_id": "c", "turn": 0, "shout": "hi"}), benchmark=bench)


def test_etapp_writes_its_calls_and_answers_in_the_sample_s_method(tmp_path):
    etapp = get_benchmark("etapp")
    fc, react = "tool_given/fc/John_Doe-1", "tool_given/react/John_Doe-1"
    call = {"name": "view_today_alarms", "arguments": {}}
    path = script(tmp_path, {"sample_id": fc, "turn": 0, "calls": [call]},
                  {"sample_id": react, "turn": 0, "calls": [call]}, {"sample_id": fc, "turn": 1, "answer": "done"})
    scripted = engine(path, benchmark=etapp)
    hermes, step, answer, missing_fc, missing_react = texts(scripted, f"{fc}@0", f"{react}@0", f"{fc}@1", f"{fc}@2",
                                                            f"{react}@1")
    assert hermes == "<tool_call>\n{'name': 'view_today_alarms', 'arguments': {}}\n</tool_call>"
    assert step.endswith("Action: view_today_alarms\nAction Input: {}") and answer == "done"
    # a call the script does not reach ends the case: ETAPP's final answer "", in the method's form
    assert missing_fc == "" and missing_react.endswith("Final Answer: ")
    with pytest.raises(DatasetError, match="line 1: calls must be a non-empty list"):
        engine(script(tmp_path, {"sample_id": fc, "turn": 0, "calls": []}), benchmark=etapp)


def test_the_engine_config_needs_an_existing_file(tmp_path):
    assert any("is not a file" in p for p in CONFIG(script=str(tmp_path / "absent.jsonl")).problems())
    assert CONFIG(script=script(tmp_path, {"sample_id": "c", "turn": 0, "text": ""})).problems() == []
