"""The Polar prompt pipeline with the embedded model's real tokenizer and chat template."""

from __future__ import annotations

import copy

import polars as pl
import pytest

from inference.benchmarks.petoolbench import load_petoolbench
from inference.generation import load_tokenizer
from inference.benchmarks.petoolbench.history import drop_oldest
from inference.prompts import render_chat, TOO_LONG, PromptSettings, render_prompts, template_has_system
from tests.conftest import SAMPLE

NO_SYSTEM_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "<turn>{{ m['role'] }}\n{{ m['content'] }}</turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<turn>model\n{% endif %}")


@pytest.fixture(scope="module")
def tokenizer(embedded_model):
    return load_tokenizer(str(embedded_model))


@pytest.fixture(scope="module")
def samples():
    return load_petoolbench(SAMPLE, ["p", "r", "c"], limit=3)


def test_renders_system_and_user_turns_and_counts_tokens(tokenizer, samples):
    table = render_prompts(samples, tokenizer, PromptSettings(8192, 256))
    row = table.row(0, named=True)
    assert row["prompt"].startswith("<|im_start|>system\n" + row["system"])
    assert row["prompt"].endswith(row["user"] + "<|im_end|>\n<|im_start|>assistant\n")
    assert row["prompt_tokens"] == len(row["prompt_token_ids"]) > 300
    assert table["prompt_token_ids"].list.len().to_list() == table["prompt_tokens"].to_list()
    assert table["failure"].is_null().all()


def test_template_without_system_role_folds_it_into_the_user_turn(tokenizer, samples):
    plain = copy.deepcopy(tokenizer)
    plain.chat_template = NO_SYSTEM_TEMPLATE
    assert template_has_system(tokenizer) and not template_has_system(plain)
    row = render_prompts(samples.head(1), plain, PromptSettings(8192, 256)).row(0, named=True)
    assert row["prompt"].startswith("<turn>user\n" + row["system"] + "\n\n" + row["user"])
    folded = render_chat(plain, [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], None, True, True)
    assert folded.startswith("<turn>user\nS\n\nU")


def test_too_long_prompts_become_rows_never_truncated(tokenizer, samples):
    table = render_prompts(samples, tokenizer, PromptSettings(max_model_len=700, max_new_tokens=256))
    long = table.filter(pl.col("prompt_tokens") > 700 - 256)
    assert long.height > 0
    assert (long["failure"] == TOO_LONG).all()
    assert table.filter(pl.col("prompt_tokens") <= 444)["failure"].is_null().all()


def test_drop_oldest_history_when_asked(tokenizer, samples):
    full = render_prompts(samples, tokenizer, PromptSettings(8192, 256))
    longest = int(full["prompt_tokens"].arg_max())
    limit = int(full["prompt_tokens"].max()) + 256 - 1  # only the longest prompt is too long
    table = render_prompts(samples, tokenizer, PromptSettings(limit, 256, shorten=drop_oldest))
    assert table["history_dropped"].to_list() == [1 if i == longest else 0 for i in range(table.height)]
    assert (table["prompt_tokens"] <= limit - 256).all()
    assert table["failure"].is_null().all()
    row, original = table.row(longest, named=True), full.row(longest, named=True)
    assert row["system"] == original["system"]  # the sample table is untouched; only the prompt shrinks
    assert row["prompt_tokens"] < original["prompt_tokens"]


def test_drop_oldest_removes_the_oldest_history_items():
    system = 'Intro\nInteraction history is:\n[{"a": 1}, {"b": "é"}, {"c": 3}]\n\nAvailable tools ...'
    assert drop_oldest(system, 2) == 'Intro\nInteraction history is:\n[{"c": 3}]\n\nAvailable tools ...'
    assert drop_oldest(system, 4) is None
    assert drop_oldest("no history here", 1) is None
