"""FamilyTool adapter: counts against SOURCE.md, the two KG settings, schemas, and bad files."""

from __future__ import annotations

import json

import polars as pl
import pytest

from inference.benchmarks.base import table_schema
from inference.errors import DatasetError
from inference.benchmarks.familytool import SETTINGS, load_familytool, schema_tools
from inference.prompts import attach_schemas
from tests.conftest import FAMILYTOOL_SAMPLE


def test_sample_table_shape_scorer_and_gold_as_written():
    table = load_familytool(FAMILYTOOL_SAMPLE, SETTINGS)
    assert table.schema == table_schema("unifiedtoolhub")
    assert table.group_by("setting", maintain_order=True).len().rows() == [(s, 4) for s in SETTINGS]
    assert table["sample_id"][0] == "b-0" and table["sample_id"][-1] == "e_retrieve-3"
    assert table["scorer"].unique().to_list() == ["unifiedtoolhub"]
    assert not table["allow_refusal"].any() and table["gold_tool"].null_count() == 0
    # the scorer compares against the gold as written (key order kept), not the canonical form
    first = table.row(0, named=True)
    assert json.loads(first["gold_calls"]) == [{"name": first["gold_tool"], "parameters": json.loads(first["gold_params"])}]


def test_native_turns_follow_upstream():
    """Native format: b/e send no system turn (upstream sends none), the retrieve settings carry the
    graph in one; the tools are function specs with the benchmark's own parameter objects."""
    table = load_familytool(FAMILYTOOL_SAMPLE, ("b", "b_retrieve"), limit=1)
    golden, retrieve = table.row(0, named=True), table.row(1, named=True)
    assert golden["native_system"] is None
    assert "(Rosa, prefer_restaurant, restaurant_0003)" in retrieve["native_system"]
    specs = json.loads(golden["tool_specs"])
    assert all(s["type"] == "function" and "response" not in s["function"] for s in specs)


def test_retrieve_setting_moves_the_graph_from_the_query_to_the_prompt():
    table = load_familytool(FAMILYTOOL_SAMPLE, ("b", "b_retrieve"), limit=1)
    golden, retrieve = table.row(0, named=True), table.row(1, named=True)
    assert "The extra information for the query is ([Mia, mother, Rosa]" in golden["user"]
    assert "knowledge graph, one (head, relation, tail)" not in golden["system"]
    assert retrieve["user"] == "<speak>Speaker: Mia</speak> Book a table for 4 at my mother's favourite restaurant."
    assert "(Rosa, prefer_restaurant, restaurant_0003)\n(Leo, prefer_music_genre, music_genre_0001)" in retrieve["system"]
    assert golden["gold_params"] == retrieve["gold_params"] == '{"party_size":4,"restaurant":"restaurant_0003"}'


def test_schema_tools_normalise_the_released_quirks():
    table = load_familytool(FAMILYTOOL_SAMPLE, ("b",))
    tools = json.loads(table.filter(pl.col("sample_id") == "b-1")["tools"][0])
    assert [t["tool_name"] for t in tools] == ["play_music", "order_taxi"]  # the listed-twice tool once
    assert tools[0]["optional_parameters"] == [{"name": "genre", "type": None}, {"name": "shuffle", "type": "boolean"}]
    alarm = schema_tools([{"name": "a", "parameters": {"properties": {"time": {"type": "string"}}, "required": ["time", "label"]}}])
    # nothing is required (the gold leaves required parameters out), an undefined required name is declared
    assert alarm[0]["required_parameters"] == [] and [p["name"] for p in alarm[0]["optional_parameters"]] == ["time", "label"]
    assert attach_schemas(table, "outlines")["gold_in_schema"].all()


def test_real_files_match_source_counts(familytool_dir):
    table = load_familytool(familytool_dir, SETTINGS)
    assert table.group_by("setting", maintain_order=True).len().rows() == \
        [("b", 483), ("e", 455), ("b_retrieve", 483), ("e_retrieve", 455)]
    assert table["sample_id"].n_unique() == table.height
    # the retrieve prompts carry the whole graph: 154 (b) and 491 (e) triples
    retrieve = table.filter(pl.col("setting").str.ends_with("_retrieve"))
    counts = retrieve.group_by("setting", maintain_order=True).agg(pl.col("system").first().str.count_matches("\n\\("))
    assert counts.rows() == [("b_retrieve", 154), ("e_retrieve", 491)]
    assert not retrieve["user"].str.contains("The extra information").any()


def test_real_gold_schema_coverage(familytool_dir):
    """Gold calls the declared tools cannot express (undeclared parameters) are counted, not hidden."""
    covered = attach_schemas(load_familytool(familytool_dir, ("b", "e")), "outlines")
    share = covered.group_by("setting", maintain_order=True).agg(pl.col("gold_in_schema").mean())
    assert [round(v, 3) for v in share["gold_in_schema"]] == [0.938, 0.941]


BAD_CASES = {
    "wrong_roles": ('[{"role": "id", "content": "KGMTUbench_1"}]', "a case must be a list of messages with roles"),
    "bad_id": ('[{"role":"id","content":"case-1"},{"role":"candidate_tools","content":[{"name":"t"}]},'
               '{"role":"user","content":"q"},{"role":"tool_call","content":[{"name":"t","parameters":{}}]}]',
               "id must look like 'KGMTUbench_<number>', got 'case-1'"),
    "gold_not_candidate": ('[{"role":"id","content":"KGMTUbench_1"},{"role":"candidate_tools","content":[{"name":"t"}]},'
                           '{"role":"user","content":"q"},{"role":"tool_call","content":[{"name":"u","parameters":{}}]}]',
                           "gold tool 'u' is not among the 1 candidates"),
    "malformed": ("[{", "malformed JSON on line 1"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_case_files_are_reported_with_the_line(tmp_path, case):
    line, expected = BAD_CASES[case]
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "familytool-b.jsonl").write_text(line + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        load_familytool(tmp_path, ("b",))
    assert expected in str(err.value)


def test_missing_folder_says_what_to_point_at(tmp_path):
    with pytest.raises(DatasetError, match="no datasets/ folder; point it at the FamilyTool folder"):
        load_familytool(tmp_path, ("b",))
