"""The table of what differs from upstream ETAPP (docs/benchmarks/etapp.md), held against the code:
every row id either has a check of the behaviour it names here, or names the test that checks it elsewhere,
so a row that goes stale (or a new row nobody checks) fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from grading.scorers.etapp_judge import rubric as jt, upstream
from inference.benchmarks.etapp import agent, prompt_files as pf
from inference.benchmarks.etapp.apps import APPS, SUBSTITUTED_TOOLS
from inference.benchmarks.etapp.cases import load_cases
from inference.benchmarks.etapp.options import EtappOptions
from inference.engines import Generation

REPO = Path(__file__).resolve().parents[1]
ETAPP_YAML = yaml.safe_load((REPO / "conf" / "dataset" / "etapp.yaml").read_text())


def readme_rows() -> dict[str, str]:
    """id -> the row's text, from the table under "What differs from upstream"."""
    text = (REPO / "docs" / "benchmarks" / "etapp.md").read_text()
    table = text[text.index("**What differs from upstream"):].split("\n\n")[1]
    return {m[1]: line for line in table.splitlines() if (m := re.match(r"\| `([a-z-]+)` \|", line))}


def _own_texts(etapp_data, tmp_path):
    assert pf.resolve("own", etapp_data) is None and pf.resolve("auto", tmp_path) is None
    assert pf.resolve("auto", etapp_data) is not None


def _inline_texts(etapp_data, tmp_path):
    files = pf.read(etapp_data)  # the folder as published: the three prompt files only
    assert files.reminders is None and files.hints is None
    assert files.facts()["reminders"].startswith("own") and files.facts()["judge_skeleton_hints"].startswith("own")


def _local_judge(etapp_data, tmp_path):
    assert "/model@roles.judge.model: smollm2-135m" in [f"{k}: {v}" for d in ETAPP_YAML["defaults"] if isinstance(d, dict)
                                                         for k, v in d.items()]
    assert (REPO / "conf" / "engine" / "chat.yaml").is_file()


def _judge_budget(etapp_data, tmp_path):
    assert ETAPP_YAML["roles"]["judge"]["decoding"]["max_new_tokens"] == 3072


def _answer(score: object) -> str:
    finals = {d: {"Final Assessment": {"score": score}} for d in jt.DIMENSIONS}
    return "```json\n" + __import__("json").dumps(finals) + "\n```"


def _judge_failures(etapp_data, tmp_path):
    assert isinstance(upstream.read_upstream_answer(_answer("4.5"), [], []), str)  # a row, where upstream crashed
    assert ETAPP_YAML["roles"]["judge"]["decoding"]["temperature"] == 0.0  # hence no retry by default


def _judge_range(etapp_data, tmp_path):
    assert isinstance(upstream.read_upstream_answer(_answer(7), [], []), str)
    assert not isinstance(upstream.read_upstream_answer(_answer(5), [], []), str)


def _fresh_sandbox(etapp_data, tmp_path):
    assert EtappOptions(path="x").state == ETAPP_YAML["dataset"]["state"] == "tool"


def _substitutes(etapp_data, tmp_path):
    assert {"play_music", "find_restaurants", "find_flight", "search_from_wikipedia"} <= set(SUBSTITUTED_TOOLS)


def _search_order(etapp_data, tmp_path):
    folders = [app.folder for app in APPS]
    assert folders == sorted(folders)


def _guards(etapp_data, tmp_path):
    """A ReAct response past the per-case call limit ends the case with upstream's abort."""
    options = EtappOptions(path="x")
    assert (options.max_calls_per_response, options.max_calls_per_case, options.max_tokens_per_call) == (10, 50, 16384)
    case = load_cases(etapp_data, ["John_Doe"], [7])[0]
    episode = agent.Episode(sample_id="s", case=case, setting="tool_given", method="react", sandbox=None, chat=[],
                            tools=None, calls=options.max_calls_per_case)
    limits = agent.Limits(20, 1024, 8192, options.max_calls_per_response, options.max_calls_per_case,
                          options.max_tokens_per_call)
    step = 'Thought: t\nAction: get_today_weather\nAction Input: {"location": "Boston"}'
    agent.absorb(episode, Generation("s", step, "stop", output_tokens=20), 100, limits)
    assert episode.end_reason == agent.TOO_MANY_CALLS and episode.record[-1]["content"] == agent.text.ABORT_CALLS


def _decoding(etapp_data, tmp_path):
    greedy = yaml.safe_load((REPO / "conf" / "decoding" / "greedy.yaml").read_text())
    assert ETAPP_YAML["decoding"]["max_new_tokens"] == 1024 and greedy["temperature"] == 0.0


CHECKS = {"own-texts": _own_texts, "inline-texts": _inline_texts, "local-judge": _local_judge,
          "judge-budget": _judge_budget, "judge-failures": _judge_failures, "judge-range": _judge_range,
          "fresh-sandbox": _fresh_sandbox, "substitutes": _substitutes, "search-order": _search_order,
          "guards": _guards, "decoding": _decoding}
ELSEWHERE = {
    "resume": "tests/inference/test_etapp_vllm.py (a killed run resumes to identical results)",
    "engine-errors": "tests/grading/test_etapp_judge.py (engine-error episodes out of the means, counted)",
    "literal-queries": "tests/inference/test_etapp_sandbox_adversarial.py and the conformance set",
    "context-edge": "tests/inference/test_etapp_run.py (a prompt past the context ends too_long)",
    "fc-template": "tests/inference/test_prompts.py (tools rendered by the chat template)",
    "llama-eot": "tests/inference/test_etapp_raw_texts.py (the Llama reader's rows)",
    "other-families": "tests/inference/test_etapp_raw_texts.py (vLLM's parsers for other families)",
}


def test_every_row_is_checked_here_or_names_its_test():
    rows = readme_rows()
    assert len(rows) >= 15
    assert set(rows) == set(CHECKS) | set(ELSEWHERE), "a docs row without a check, or a check without its row"
    for path in ELSEWHERE.values():
        assert (REPO / path.split(" ")[0]).is_file(), path


@pytest.mark.parametrize("row", sorted(CHECKS))
def test_the_row_still_holds(row, etapp_data, tmp_path):
    CHECKS[row](etapp_data, tmp_path)
