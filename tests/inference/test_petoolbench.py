"""The PEToolBench adapter: both file layouts, limits, ids, and one error listing every bad record."""

from __future__ import annotations

import json

import pytest

from inference.errors import DatasetError
from inference.benchmarks.base import table_schema
from inference.benchmarks.petoolbench import load_petoolbench
from tests.conftest import SAMPLE


def _records():
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def _write(path, records):
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return path


def test_bundled_sample_loads_in_setting_order():
    table = load_petoolbench(SAMPLE, ["p", "r", "c"])
    assert table.schema == table_schema("petoolbench")
    assert table.height == 3 * len(_records())
    assert table["setting"].to_list()[:1] == ["p"] and table["setting"].to_list()[-1] == "c"
    first = _records()[0]
    assert table["sample_id"][0] == f"p-{first['entry_id']}"
    assert table["system"][0] == first["instruction_preferred"]
    assert table["user"][0] == first["query"]


def test_settings_and_limit():
    table = load_petoolbench(SAMPLE, ["r"], limit=3)
    assert table["sample_id"].to_list() == [f"r-{r['entry_id']}" for r in _records()[:3]]


def test_per_setting_layout(tmp_path):
    folder = tmp_path / "dataset_test"
    folder.mkdir()
    for setting in "prc":
        _write(folder / f"user_entries_test_{setting}.json", _records())
    table = load_petoolbench(tmp_path, ["c", "p"], limit=2)
    assert table["sample_id"].to_list() == [f"{s}-{r['entry_id']}" for s in "cp" for r in _records()[:2]]


def test_real_file_counts(petoolbench_file):
    table = load_petoolbench(petoolbench_file, ["p", "r", "c"])
    assert table.height == 3000
    assert table["sample_id"].n_unique() == 3000
    assert "r-17666" in table["sample_id"].to_list()


def test_every_bad_record_listed_at_once(tmp_path):
    records = _records()[:6]
    del records[0]["query"]
    records[1]["apis_candidate"] = "[{not json"
    records[2]["api_call_ground_truth"]["tool_name"] = "<Nope>.<Missing>.<Tool>"
    records[3]["entry_id"] = records[4]["entry_id"]
    path = _write(tmp_path / "bad.json", records)
    with pytest.raises(DatasetError) as err:
        load_petoolbench(path, ["p", "r", "c"])
    message = str(err.value)
    assert "4 bad record(s)" in message
    assert f"bad.json: record 0 (entry_id={records[0]['entry_id']}): missing or empty fields ['query']" in message
    assert "apis_candidate is not decodable JSON" in message
    assert "gold tool '<Nope>.<Missing>.<Tool>' is not among the" in message
    assert f"duplicate entry_id {records[4]['entry_id']}" in message


@pytest.mark.parametrize("content,expected", [
    (b"[{\"entry_id\": 1,", "malformed JSON at line 1"),
    (b"\xff\xfe[]", "not UTF-8"),
    (b"[]", "holds no records"),
    (b"{\"entry_id\": 1}", "expected a JSON array"),
], ids=["malformed_json", "non_utf8", "empty", "not_a_list"])
def test_unreadable_files(tmp_path, content, expected):
    path = tmp_path / "data.json"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=expected):
        load_petoolbench(path, ["p"])


def test_missing_path(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_petoolbench(tmp_path / "absent.json", ["p"])
