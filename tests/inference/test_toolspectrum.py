"""ToolSpectrum adapter: counts and refusals against SOURCE.md, the toolset prompt, groups, bad files."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

from inference.benchmarks.base import table_schema
from inference.errors import DatasetError
from inference.prompts import attach_schemas
from inference.benchmarks.toolspectrum import SETTINGS, allowed_values, argument, load_toolspectrum, render_toolset
from tests.conftest import TOOLSPECTRUM_SAMPLE

ALL = tuple(SETTINGS)


@pytest.mark.parametrize("key,expected", [("mediaQuality (str)", ("mediaQuality", "str")),
                                          ("amount (float)", ("amount", "float")),
                                          ("weird", ("weird", ""))])
def test_argument_keys(key, expected):
    assert argument(key) == expected


def test_sample_table_shape_refusals_and_declarations():
    table = load_toolspectrum(TOOLSPECTRUM_SAMPLE, ALL)
    assert table.schema == table_schema("toolspectrum_f1")
    assert table.group_by("setting", maintain_order=True).agg(pl.len(), pl.col("gold_tool").null_count()).rows() == \
        [("persona", 4, 0), ("environment", 4, 0), ("persona_environment", 4, 2)]
    assert table.group_by("setting", maintain_order=True).agg(pl.col("allow_refusal").all())["allow_refusal"].to_list() == \
        [False, False, True]
    row = table.filter(sample_id="persona_environment-1").row(0, named=True)
    assert row["gold_tool"] == "CityRide.requestRide"
    toolset = json.loads(row["toolset"])
    assert {k: v for k, v in toolset["CityRide.requestRide"]["groups"].items() if k in json.loads(row["gold_params"])} \
        == {"destination": "required", "carClass": "personalized", "lowDataMode": "environmental",
            "darkTheme": "environmental", "volumeLevel": "environmental"}
    assert toolset["ReadAloud.findPodcast"] == {**toolset["ReadAloud.findPodcast"], "app": "ReadAloud", "api": "findPodcast"}
    assert table.filter(pl.col("gold_tool").is_null())["gold_params"].to_list() == ["null", "null"]


def test_prompt_shows_the_whole_toolset_and_only_the_setting_context():
    table = load_toolspectrum(TOOLSPECTRUM_SAMPLE, ALL, limit=1)
    persona, environment, both = table["system"].to_list()
    for api in ("CityRide.requestRide", "ReadAloud.playBook", "ReadAloud.findPodcast", "CoinPurse.transfer"):
        assert all(f"- {api}:" in s for s in (persona, environment, both)), api
    assert "Policy: Users under the age of 18 may not transfer money." in both
    assert "profile" in persona and "The user's current environment" not in persona
    assert "The user's current environment" in environment and "The user's profile" not in environment
    assert '"tool_name": null' in both and '"tool_name": null' not in persona
    # the shared environmental arguments are written once, not under every API
    assert both.count("lowDataMode (bool)") == 1 and both.count("[env]") == 1 + 4  # the legend, then 4 APIs


def test_refusal_is_in_the_grammar_only_where_allowed():
    schemas = attach_schemas(load_toolspectrum(TOOLSPECTRUM_SAMPLE, ALL), "outlines")
    has_refusal = schemas.group_by("setting", maintain_order=True).agg(
        pl.col("schema_json").first().str.contains('"tool_name":{"type":"null"}', literal=True))
    assert has_refusal.rows() == [("persona", False), ("environment", False), ("persona_environment", True)]
    assert schemas["gold_in_schema"].all()


def test_real_files_match_source_counts(toolspectrum_dir):
    table = load_toolspectrum(toolspectrum_dir, ALL)
    counts = table.group_by("setting", maintain_order=True).agg(pl.len(), pl.col("gold_tool").null_count())
    assert counts.rows() == [("persona", 449, 0), ("environment", 220, 0), ("persona_environment", 333, 240)]
    tools = json.loads(table["tools"][0])
    assert len(tools) == 42 and len({t["tool_name"].split(".")[0] for t in tools}) == 23
    # 606 gold values in the environment set are the strings "True"/"False"
    env = table.filter(setting="environment")["gold_params"].map_elements(
        lambda p: sum(v in ("True", "False") for v in json.loads(p).values()), return_dtype=pl.Int64)
    assert env.sum() == 606


def test_real_toolset_fits_an_8k_context(toolspectrum_dir, embedded_model):
    """The compact toolset keeps every prompt under SmolLM2's 8192 tokens with room for the answer."""
    from transformers import AutoTokenizer

    from inference.prompts import PromptSettings, render_prompts

    tokenizer = AutoTokenizer.from_pretrained(embedded_model)
    table = load_toolspectrum(toolspectrum_dir, ALL, limit=20)
    rendered = render_prompts(attach_schemas(table, "outlines"), tokenizer, PromptSettings(8192, 256))
    assert rendered["failure"].null_count() == rendered.height, rendered["prompt_tokens"].max()
    api = json.loads((toolspectrum_dir / "api" / "API_description.json").read_text())
    text = render_toolset(api)
    assert all(f"- {app}.{name}:" in text for app, spec in api.items() for name in spec["APIs"])


def test_missing_gold_field_and_unknown_api_are_reported(tmp_path):
    shutil.copytree(TOOLSPECTRUM_SAMPLE, tmp_path / "ts")
    path = tmp_path / "ts" / "data" / "dataset_persona.json"
    cases = json.loads(path.read_text())
    del cases[0]["toolCall"]
    cases[1]["toolCall"]["API"] = "teleport"
    path.write_text(json.dumps(cases))
    with pytest.raises(DatasetError) as err:
        load_toolspectrum(tmp_path / "ts", ("persona",))
    message = str(err.value)
    assert "dataset_persona.json: case 0: missing field 'toolCall' (null means the right answer is to refuse)" in message
    assert "dataset_persona.json: case 1: gold API ReadAloud.teleport is not in the setting's API file" in message


def test_missing_folder_says_what_to_point_at(tmp_path):
    with pytest.raises(DatasetError, match="lacks data/ or api/; point it at the ToolSpectrum folder"):
        load_toolspectrum(tmp_path, ("persona",))


@pytest.mark.parametrize("description,arg_type,expected", [
    ("Quality. Available values: ['high', 'low'].", "str", ["high", "low"]),
    ("Captions. Available values: [True, False].", "bool", [True, False, "True", "False"]),
    ("Level. Available values: [low, high].", "str", ["low", "high"]),
    ("Price range, e.g. Available values: [0, 100].", "list", None),
    ("Free text.", "str", None),
], ids=["quoted strings", "booleans also as the gold's strings", "unquoted", "numeric range is not a choice", "none"])
def test_allowed_values(description, arg_type, expected):
    assert allowed_values(description, arg_type) == expected


def test_choices_constrain_personalized_arguments_but_not_required_ones():
    tools = {t["tool_name"]: t for t in json.loads(load_toolspectrum(TOOLSPECTRUM_SAMPLE, ("persona_environment",))["tools"][0])}
    ride = tools["CityRide.requestRide"]
    assert ride["required_parameters"] == [{"name": "destination", "type": "str"}]
    assert ride["optional_parameters"][0] == {"name": "carClass", "type": "str", "enum": ["economy", "premium"]}
    assert {"name": "lowDataMode", "type": "bool", "enum": [True, False, "True", "False"]} in ride["optional_parameters"]
