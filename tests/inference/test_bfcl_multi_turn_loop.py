"""BFCL's multi-turn loop in the native format (Hermes calls, as BFCL's QwenFCHandler runs them) and the
held-out turn's announcement, with a scripted generate (no model): what the next prompt shows and how
the case is graded."""

from __future__ import annotations

import json

import polars as pl
import pytest

from grading.scorers.bfcl import grade
from grading.scorers.bfcl.environments import load
from inference.benchmarks.bfcl import multi_turn as loop_module
from inference.benchmarks.bfcl.data import load_bfcl
from inference.benchmarks.bfcl.solver import with_texts
from inference.benchmarks.bfcl.texts import resolve
from inference.engines import Generation
from inference.generation import Rendered

pytestmark = pytest.mark.shared_data


def hermes(calls: list[str]) -> str:
    """Ground-truth call strings as Hermes blocks (keyword arguments only)."""
    import ast

    blocks = []
    for call in calls:
        node = ast.parse(call, mode="eval").body
        blocks.append("<tool_call>\n" + json.dumps({"name": node.func.id, "arguments": {
            k.arg: ast.literal_eval(k.value) for k in node.keywords}}) + "\n</tool_call>")
    return "\n".join(blocks)


def run_one(bfcl_data, bfcl_eval_copy, category: str, number: int, texts_of, native: bool):
    texts = resolve("upstream", bfcl_eval_copy, str(bfcl_data))
    table = with_texts(load_bfcl(bfcl_data, (category,)), texts).filter(pl.col("entry_id") == number)
    truth = json.loads(table["possible_answer"][0])
    script = [text for turn in truth for text in texts_of(turn)]
    loop = loop_module.Loop(native, texts, False, 64, 1 << 30)
    chats = []

    def generate(requests):
        k = [int(r.sample_id.rpartition("@")[2]) for r in requests]
        return [Generation(r.sample_id, script[i] if i < len(script) else "", "stop", 1) for r, i in zip(requests, k)]

    def render(chat, tools):
        chats.append(([dict(m) for m in chat], tools))
        return Rendered("", (), None)

    episode = loop_module.start(loop_module.cases_of(table)[0], load(bfcl_eval_copy).classes, loop)
    loop_module.run([episode], generate, render, loop)
    row = {**table.row(0, named=True), "output": json.dumps(episode.outputs), "failure": None,
           "prompt_format": "native" if native else "benchmark", "bfcl_code": bfcl_eval_copy}
    return episode, grade("official", row), chats


def keyword_only(turns: list[list[str]]) -> bool:
    import ast

    return all(not ast.parse(c, mode="eval").body.args for t in turns for c in t)


def test_native_hermes_calls_run_and_grade_as_bfcls_qwen_handler(bfcl_data, bfcl_eval_copy):
    number = next(i for i, line in enumerate((bfcl_data / "possible_answer" / "BFCL_v4_multi_turn_base.json").open())
                  if keyword_only(json.loads(line)["ground_truth"]))
    episode, graded, chats = run_one(bfcl_data, bfcl_eval_copy, "multi_turn_base", number,
                                     lambda turn: [hermes(turn), "All done."] if turn else ["Nothing to do."], True)
    assert graded["correct"], graded
    messages, tools = chats[-1]
    assert messages[0]["role"] == "user" and tools  # no system prompt of BFCL's: the functions are the template's tools
    assert all(t["description"].endswith(resolve("upstream", bfcl_eval_copy, "").hint) for t in tools)
    called = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
    assert called and all(m["content"] == "" for m in called)  # the calls alone, as the Hermes handler keeps them
    first_call = next(s["calls"][0] for t in episode.trace for s in t["steps"] if s.get("calls"))
    assert [m for m in messages if m["role"] == "tool"][0]["name"] == first_call  # named by the call, as BFCL does


def test_a_held_out_turn_is_announced_with_bfcls_message_and_unhinted_docs(bfcl_data, bfcl_eval_copy):
    line = (bfcl_data / "BFCL_v4_multi_turn_miss_func.json").open().readline()
    question = json.loads(line)
    turn = int(next(iter(question["missed_function"])))
    episode, _, chats = run_one(bfcl_data, bfcl_eval_copy, "multi_turn_miss_func", 0,
                                lambda t: [f"[{', '.join(t)}]", ""] if t else [""], False)
    announced = episode.trace[turn]["query"][0]["content"]
    assert announced.endswith("\nI have updated some more functions you can choose from. What about now?")
    names = question["missed_function"][str(turn)]
    assert all(f"'name': '{name}'" in announced for name in names)  # the docs as Python writes a list
    hint = resolve("upstream", bfcl_eval_copy, "").hint.strip()
    assert hint and hint not in announced  # no language hint on held-out docs, as in BFCL
    system = chats[-1][0][0]["content"]
    assert all(f'"name": "{name}"' not in system for name in names)  # the system prompt is never updated
