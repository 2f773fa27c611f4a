"""The shared reader of Python source's literal constants, as ETAPP's prompt-file reader uses it:
upstream's method tables resolved, a broken file named, nothing executed."""

from __future__ import annotations

import pytest

from inference.benchmarks.etapp import prompt_files as pf
from inference.errors import DatasetError
from inference.python_source import literal_constants

AGENT = ('SYSTEM = "You are an agent."\nUSER = "Do {task}."\nREACT_ONESHOT_EXAMPLE = "example"\n'
         'EXEC_PROMPT = "run it"\nPROMPT_DICT = {"fine-tuned": (SYSTEM, USER), "react": (SYSTEM, USER)}\n'
         'import os\nos.remove("never")\n')
RETRIEVAL = AGENT.replace("PROMPT_DICT", "RETRIEVAL_PROMPT_DICT").replace("REACT_ONESHOT", "RETRIEVAL_REACT_ONESHOT")
JUDGE = 'EVALUATE_PERSONALIZATION_AND_PROACTIVITY = "Judge " + "this."\n'


def _upstream(root, **replaced):
    for name, text in {pf.AGENT: AGENT, pf.RETRIEVAL: RETRIEVAL, pf.JUDGE: JUDGE, **replaced}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_literal_constants_resolve_names_and_skip_statements():
    found = literal_constants(AGENT, "generation_prompt.py")
    assert found["PROMPT_DICT"] == {"fine-tuned": ["You are an agent.", "Do {task}."],
                                    "react": ["You are an agent.", "Do {task}."]}
    assert "os" not in found


def test_etapps_reader_takes_upstreams_tables_through_the_shared_reader(tmp_path):
    files = pf.read(_upstream(tmp_path))
    assert files.system_and_user("fc", retrieval=False) == ("You are an agent.", "Do {task}.")
    assert files.system_and_user("react", retrieval=True) == ("You are an agent.", "Do {task}.")
    assert files.judge_template == "Judge this." and files.exec_prompt == "run it"


def test_a_prompt_file_that_is_not_python_is_named_with_the_fix(tmp_path):
    root = _upstream(tmp_path, **{pf.JUDGE: "EVALUATE_PERSONALIZATION_AND_PROACTIVITY = (\n"})
    with pytest.raises(DatasetError, match=r"evaluate_prompt.py is not valid Python .*line 1.*dataset.prompts=own"):
        pf.read(root)
