"""Each verb's parser is built by one function that its main also parses with, so the generated
command reference and the docs check read the options the verb really takes."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from inference.verbs import RUN, VERBS, Verb, verb_parser
from tests.conftest import REPO

NOT_RUN = [verb for verb in VERBS if verb.name != RUN]


@pytest.mark.parametrize("verb", NOT_RUN, ids=[verb.name for verb in NOT_RUN])
def test_a_verbs_main_parses_with_the_parser_its_record_names(verb, capsys):
    prog = f"toolsweep {verb.name}"
    with pytest.raises(SystemExit) as done:
        verb.entry()(["--help"], prog=prog)
    assert done.value.code == 0
    assert capsys.readouterr().out == verb.build_parser(prog).format_help()


def test_verb_parser_builds_each_parser_without_calling_a_main(monkeypatch):
    def no_main(self: Verb) -> None:
        raise AssertionError(f"verb_parser called the main of {self.name}")

    monkeypatch.setattr(Verb, "entry", no_main)
    parsers = {verb.name: verb_parser(verb.name) for verb in VERBS}
    assert all(isinstance(p, argparse.ArgumentParser) for p in parsers.values())
    assert all(p.prog == f"toolsweep {name}" for name, p in parsers.items())


def test_building_every_parser_imports_no_engine():
    # a fresh interpreter: this one may already hold torch from another test
    code = ("import sys; from inference.verbs import VERBS, verb_parser; [verb_parser(v.name) for v in VERBS]; "
            "print(sorted(m for m in ('vllm', 'torch', 'transformers', 'outlines') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n", done.stderr


def test_an_unknown_verb_is_named_with_the_verbs():
    with pytest.raises(KeyError, match="no verb 'nope'; the verbs are"):
        verb_parser("nope")
