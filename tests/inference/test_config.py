"""Every option of every config group composes into typed config; typos and bad values fail early."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

import inference.cli  # noqa: F401  (registers the schema and resolvers, as the entry point does)
from inference.benchmarks import benchmark_names, load_dataset
from inference.benchmarks.base import table_schema
from inference.config import ToolsweepConfig, validate
from inference.errors import ConfigError
from inference.run import run_config
from tests.conftest import REPO, SAMPLE, SHARED_DATA

CONF = REPO / "conf"
# suite presets are added (+suite=...) to a sweep, not chosen: tests/inference/test_suite.py composes them
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name not in ("hydra", "suite"))
LAUNCHERS = sorted(p.stem for p in (CONF / "hydra" / "launcher").glob("*.yaml"))
# values a group option leaves required (???), filled so the option can compose
REQUIRED = {"model=local": ["model.path=/models/x"], "dataset=petoolbench": [f"dataset.path={SAMPLE}"],
            "dataset=familytool": [f"dataset.path={REPO}/datasets/familytool_sample"],
            "dataset=toolspectrum": [f"dataset.path={REPO}/datasets/toolspectrum_sample"],
            "dataset=etapp": [f"dataset.path={SHARED_DATA / 'etapp'}"],
            "dataset=acebench": [f"dataset.path={SHARED_DATA / 'acebench'}"],
            "dataset=bfcl": [f"dataset.path={SHARED_DATA / 'bfcl' / 'data'}"],
            "engine=replay": ["engine.predictions=/tmp/p.jsonl"],
            "engine=script": ["engine.script=/tmp/turns.jsonl"],
            "engine=openai": ["engine.base_url=http://127.0.0.1:1/v1"],
            "engine=chat": ["engine.base_url=http://127.0.0.1:1/v1"]}


def _typed(overrides: list[str]):
    """(typed config, benchmark) as the entry point makes them: compose, resolve, type."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return run_config(OmegaConf.to_container(cfg, resolve=True))


def _compose(overrides: list[str]) -> ToolsweepConfig:
    return _typed(overrides)[0]


def _validate(overrides: list[str]) -> None:
    validate(*_typed(overrides))


OPTIONS = [f"{g}={p.stem}" for g in GROUPS for p in sorted((CONF / g).glob("*.yaml"))]


@pytest.mark.parametrize("option", OPTIONS)
def test_every_group_option_composes(option):
    cfg = _compose([option, *REQUIRED.get(option, [])])
    assert isinstance(cfg, ToolsweepConfig)
    group, name = option.split("=")
    assert getattr(cfg, group) is not None


DATASET_OPTIONS = [o for o in OPTIONS if o.startswith("dataset=")]


@pytest.mark.parametrize("option", DATASET_OPTIONS)
def test_every_dataset_option_names_a_benchmark_and_loads(option):
    """Each conf/dataset option names a registered benchmark, a subset of its settings, and
    (filled where the YAML leaves it required) a path its loader reads."""
    cfg, benchmark = _typed([option, *REQUIRED.get(option, [])])
    assert isinstance(cfg.dataset, benchmark.options)
    assert set(cfg.dataset.settings) <= set(benchmark.settings), (option, cfg.dataset.settings)
    if not Path(cfg.dataset.path).exists():
        pytest.skip(f"{option}: its data is absent ({cfg.dataset.path}; it lives in ../shared/data)")
    table = load_dataset(cfg.dataset.name, cfg.dataset.path, cfg.dataset.settings, limit=2)
    if benchmark.solvers != ("single_call",):  # a multi-turn benchmark has its own case table
        assert table.height and {"sample_id", "setting"} <= set(table.columns)
        return
    assert table.schema == table_schema(benchmark.scorer)
    assert table["setting"].unique(maintain_order=True).to_list() == list(cfg.dataset.settings)


def test_every_benchmark_has_a_dataset_option():
    names = {_compose([o, *REQUIRED.get(o, [])]).dataset.name for o in DATASET_OPTIONS}
    assert names == set(benchmark_names())


def test_groups_are_all_covered():
    assert set(GROUPS) == {"model", "dataset", "engine", "decoding", "prompt"}
    assert len(OPTIONS) >= 8
    assert set(LAUNCHERS) == {"local", "local_gpus", "slurm", "slurm_local"}


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_every_launcher_composes(launcher):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"hydra/launcher={launcher}"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_.startswith(("hydra._internal", "hydra_plugins"))


def test_defaults_are_the_embedded_model_on_the_sample():
    cfg = _compose([])
    assert cfg.model.embedded and cfg.model.path.endswith("SmolLM2-135M-Instruct")
    assert Path(cfg.dataset.path) == SAMPLE
    assert (cfg.engine.name, cfg.decoding.constraint, cfg.decoding.max_new_tokens, cfg.decoding.temperature) == \
        ("vllm", "outlines", 256, 0.0)


@pytest.mark.parametrize("override", ["decoding.constrant=none", "model.tensor_parallel_size=1.5", "dataset.histroy=none"],
                         ids=["typo_key", "wrong_type_float", "typo_in_a_dataset_option"])
def test_typos_and_types_fail_at_composition(override):
    with pytest.raises(ConfigCompositionException):
        _compose([override])


@pytest.mark.parametrize("overrides, expected", [
    (["dataset.limit=ten"], "dataset: Value 'ten' of type 'str' could not be converted to Integer"),
    (["+dataset.histroy=none"], "dataset.histroy is not an option here"),
    (["dataset=etapp", f"dataset.path={SHARED_DATA / 'etapp'}", "+dataset.history=none"],
     "dataset.history is not an option here (EtappOptions has"),
    (["dataset=familytool", f"dataset.path={REPO}/datasets/familytool_sample", "+dataset.history=none"],
     "dataset.history is not an option here"),
    (["+engine.max_num_seqz=4"], "engine.max_num_seqz is not an option here (VLLMEngineConfig has"),
], ids=["wrong_type", "typo_in_a_benchmark_option", "petoolbench_option_under_etapp",
        "petoolbench_option_under_familytool", "typo_in_an_engine_option"])
def test_options_the_chosen_part_lacks_are_refused_before_anything_loads(overrides, expected):
    """The dataset is typed by its benchmark's options and the engine by its own: an option they
    do not have is an error that names it, never silently ignored."""
    with pytest.raises(ConfigError) as err:
        _compose(overrides)
    assert expected in str(err.value)


def test_an_engine_the_benchmark_cannot_use_is_refused_at_validation(tmp_path):
    script = tmp_path / "turns.jsonl"
    script.write_text('{"sample_id": "p-1", "turn": 0, "text": "x"}\n')
    with pytest.raises(ConfigError) as err:
        _validate(["engine=script", f"engine.script={script}"])
    assert "engine=script answers turns, which benchmark petoolbench cannot use" in str(err.value)


def test_a_role_the_benchmark_does_not_declare_is_refused():
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        data = OmegaConf.to_container(compose(config_name="config"), resolve=True)
    data["roles"] = {"judge": {"model": {"path": "/m"}, "engine": dict(data["engine"])}}
    with pytest.raises(ConfigError, match=r"roles.judge is not a role of benchmark petoolbench"):
        validate(*run_config(data))


def test_validate_lists_every_problem_at_once(tmp_path):
    with pytest.raises(ConfigError) as err:
        _validate(["decoding.constraint=lmfe", "dataset.settings=[p,x]", "dataset.limit=0",
                   f"model.path={tmp_path}", "engine.gpu_memory_utilization=1.5", "engine.cpu_kvcache_gib=0"])
    message = str(err.value)
    for expected in ("decoding.constraint must be one of ['outlines', 'xgrammar', 'guidance', 'none'], got 'lmfe'",
                     "dataset.settings must be a non-empty subset of ['p', 'r', 'c'] for petoolbench, got ['p', 'x']",
                     "dataset.limit must be an integer >= 1 or null, got 0",
                     "engine.gpu_memory_utilization must be in (0, 1], got 1.5",
                     "engine.cpu_kvcache_gib must be > 0 (GiB, e.g. 0.5 or 2), got 0.0",
                     f"model.path {str(tmp_path)!r} is not a model folder: it has no config.json"):
        assert expected in message


def test_missing_model_path_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"model.path .*nope' does not exist: toolsweep runs offline"):
        _validate(["model=local", f"model.path={tmp_path / 'nope'}"])


def test_replay_needs_predictions():
    with pytest.raises(ConfigError, match="engine.predictions '/no/such.jsonl' is not a file"):
        _validate(["engine=replay", "engine.predictions=/no/such.jsonl"])


def _schema_of(path: Path) -> tuple[type, dict]:
    import importlib

    import yaml

    data = yaml.safe_load(path.read_text())
    if path.parent.name == "engine":
        return importlib.import_module(data["target"].split(":")[0]).CONFIG, data
    from inference.benchmarks import get_benchmark

    data = data.get("dataset", data)
    return get_benchmark(data["name"]).options, data


@pytest.mark.parametrize("path", sorted([*(CONF / "engine").glob("*.yaml"), *(CONF / "dataset").glob("*.yaml")]),
                         ids=lambda p: f"{p.parent.name}={p.stem}")
def test_every_option_of_an_engine_or_benchmark_is_in_its_yaml(path):
    """An engine's and a benchmark's options are typed after composition, so Hydra knows only the
    keys their YAML lists: one left out could not be set with `key=value` (only `+key=value`)."""
    from dataclasses import fields

    schema, data = _schema_of(path)
    assert [f.name for f in fields(schema) if f.name not in data] == []


def test_help_says_what_toolsweep_is_and_lists_the_groups_a_user_chooses_from():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "inference.cli", "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("toolsweep: batch evaluation of (personalized) tool-calling LLMs")
    assert "  engine: chat, openai, replay, script, transformers, vllm\n" in done.stdout
    assert "_schema" not in done.stdout and "powered by Hydra" not in done.stdout


def test_a_benchmark_yaml_sets_its_authors_protocol_and_the_command_line_still_wins():
    """ETAPP's YAML (after decoding in the root defaults) makes the agent decode freely with 1024
    tokens per call, as upstream; an override on the command line wins over it."""
    etapp = [f"dataset.path={SHARED_DATA / 'etapp'}", "dataset=etapp"]
    cfg = _compose(etapp)
    assert (cfg.decoding.constraint, cfg.decoding.max_new_tokens) == ("none", 1024)
    assert _compose([*etapp, "decoding.constraint=xgrammar"]).decoding.constraint == "xgrammar"
    assert _compose([]).decoding.constraint == "outlines", "the single-call default is unchanged"


def test_a_roles_constraint_a_run_does_not_accept_is_refused_before_anything_loads():
    with pytest.raises(ConfigError) as err:
        _validate(["dataset=etapp", *REQUIRED["dataset=etapp"], "roles.judge.model.path=/m",
                   "roles.judge.decoding.constraint=xgramar"])
    assert ("roles.judge.decoding.constraint must be one of ['outlines', 'xgrammar', 'guidance', 'none'], "
            "got 'xgramar'") in str(err.value)
