"""The bad-input catalogue, through the `toolsweep` command: one clear message, exit 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLE
from tests.warm import toolsweep


def _records() -> list[dict]:
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def _dataset(tmp_path: Path, records=None, raw: bytes | None = None) -> list[str]:
    path = tmp_path / "data.json"
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return ["dataset=petoolbench", f"dataset.path={path}"]


def _mutated(change) -> list[dict]:
    records = _records()[:4]
    change(records)
    return records


def _predictions(tmp_path: Path, lines: list[str]) -> list[str]:
    path = tmp_path / "preds.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ["engine=replay", f"engine.predictions={path}", "dataset.settings=[p]"]


def _model_without_template(tmp_path: Path) -> list[str]:
    """The embedded model's files, with the chat template taken out of the tokenizer config."""
    from inference.models import embedded_model_dir

    folder = tmp_path / "base-model"
    folder.mkdir()
    for item in embedded_model_dir().iterdir():
        if item.name == "tokenizer_config.json":
            config = json.loads(item.read_text())
            config.pop("chat_template", None)
            (folder / item.name).write_text(json.dumps(config))
        elif item.name != "chat_template.jinja":
            (folder / item.name).symlink_to(item)
    return ["model=local", f"model.path={folder}"]


CASES = {
    "malformed_json": (lambda t: _dataset(t, raw=b'[{"entry_id": 1,'),
                       "data.json: malformed JSON at line 1 column 17"),
    "non_utf8": (lambda t: _dataset(t, raw=b'[{"query": "caf\xe9"}]'), "data.json: not UTF-8 (byte 15"),
    "empty_dataset": (lambda t: _dataset(t, raw=b"[]"), "data.json: the file holds no records."),
    "missing_fields": (lambda t: _dataset(t, _mutated(lambda r: r[0].pop("apis_candidate"))),
                       "missing or empty fields ['apis_candidate']"),
    "undecodable_candidates": (lambda t: _dataset(t, _mutated(lambda r: r[1].update(apis_candidate="[{"))),
                               "apis_candidate is not decodable JSON"),
    "duplicate_ids": (lambda t: _dataset(t, _mutated(lambda r: r[2].update(entry_id=r[3]["entry_id"]))),
                      "duplicate entry_id"),
    "gold_not_candidate": (lambda t: _dataset(t, _mutated(
        lambda r: r[0]["api_call_ground_truth"].update(tool_name="<X>.<Y>.<Z>"))), "gold tool '<X>.<Y>.<Z>' is not among"),
    "string_cap_under_outlines": (lambda t: ["decoding.max_string_chars=32"],
                                  "decoding.max_string_chars=32 needs decoding.constraint=xgrammar or guidance, got 'outlines'"),
    "unknown_setting": (lambda t: ["dataset.settings=[p,q]"],
                        "dataset.settings must be a non-empty subset of ['p', 'r', 'c'] for petoolbench, got ['p', 'q']"),
    "model_path_missing": (lambda t: ["model=local", f"model.path={t}/nope"], "nope' does not exist: toolsweep runs offline"),
    "model_without_chat_template": (_model_without_template, "has no chat template (no chat_template in "
                                                              "tokenizer_config.json, no chat_template.jinja)"),
    "model_path_not_a_model": (lambda t: ["model=local", f"model.path={t}"], "is not a model folder: it has no config.json"),
    "several_config_problems": (lambda t: ["decoding.constraint=lmfe", "decoding.max_new_tokens=0"],
                                "decoding.max_new_tokens must be an integer >= 1, got 0"),
    "replay_unknown_ids": (lambda t: _predictions(t, ['{"sample_id": "p-1", "output": ""}']),
                           "1 sample ids that are not in the dataset: p-1"),
    "replay_duplicate_ids": (lambda t: _predictions(t, ['{"sample_id": "p-900001", "output": ""}'] * 2),
                             "1 duplicate sample ids: p-900001"),
    "replay_malformed_file": (lambda t: _predictions(t, ["{not json"]), "is not readable JSONL or Parquet"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_gets_one_clear_message(tmp_path, case):
    build, expected = CASES[case]
    done = toolsweep([f"hydra.run.dir={tmp_path}/run", *build(tmp_path)], timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("toolsweep: error: ") or "\ntoolsweep: error: " in done.stderr
    assert expected in done.stderr, done.stderr


@pytest.mark.parametrize("override,expected,code", [
    ("decoding.constrant=none", "Key 'constrant' not in 'DecodingConfig'", 1),
    ("dataset.limit=ten", "toolsweep: error: dataset: Value 'ten' of type 'str' could not be converted to Integer", 2),
], ids=["typo_at_composition", "wrong_type_when_the_benchmark_types_its_options"])
def test_config_typos_fail_before_anything_loads(tmp_path, override, expected, code):
    done = toolsweep([f"hydra.run.dir={tmp_path}/run", override], timeout=300)
    assert done.returncode == code
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert "loading model" not in done.stderr


def test_offline_with_network_namespace(tmp_path):
    """The CLI runs with no network interface at all (`unshare -n`): nothing reaches for the hub."""
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.fail("unshare -n is not permitted here; run the suite as root (CI does)")
    from inference.gold import gold_outputs, write_predictions
    from inference.benchmarks.petoolbench import load_petoolbench

    preds = write_predictions(gold_outputs(load_petoolbench(SAMPLE, ["p"])), tmp_path / "gold.jsonl")
    done = subprocess.run(["unshare", "-n", sys.executable, "-m", "inference.cli", f"hydra.run.dir={tmp_path}/run",
                           "engine=replay", f"engine.predictions={preds}", "dataset.settings=[p]"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
