"""Every option of every config group composes into typed config; typos and bad values fail early."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

import inference.cli  # noqa: F401  (registers the schema and resolvers, as the entry point does)
from inference.benchmarks import benchmark_names, get_benchmark, load_dataset
from inference.benchmarks.base import table_schema
from inference.config import ToolsweepConfig, validate
from inference.errors import ConfigError
from tests.conftest import REPO, SAMPLE, SHARED_DATA

CONF = REPO / "conf"
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name != "hydra")
LAUNCHERS = sorted(p.stem for p in (CONF / "hydra" / "launcher").glob("*.yaml"))
# values a group option leaves required (???), filled so the option can compose
REQUIRED = {"model=local": ["model.path=/models/x"], "dataset=petoolbench": [f"dataset.path={SAMPLE}"],
            "dataset=familytool": [f"dataset.path={REPO}/datasets/familytool_sample"],
            "dataset=toolspectrum": [f"dataset.path={REPO}/datasets/toolspectrum_sample"],
            "dataset=etapp": [f"dataset.path={SHARED_DATA / 'etapp'}"],
            "engine=replay": ["engine.predictions=/tmp/p.jsonl"],
            "engine=script": ["engine.script=/tmp/turns.jsonl"],
            "engine=openai": ["engine.base_url=http://127.0.0.1:1/v1"]}


def _compose(overrides: list[str]) -> ToolsweepConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return OmegaConf.to_object(cfg)


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
    cfg = _compose([option, *REQUIRED.get(option, [])])
    benchmark = get_benchmark(cfg.dataset.name)
    assert set(cfg.dataset.settings) <= set(benchmark.settings), (option, cfg.dataset.settings)
    if not Path(cfg.dataset.path).exists():
        pytest.skip(f"{option}: its data is absent ({cfg.dataset.path}; it lives in ../shared/data)")
    table = load_dataset(cfg.dataset.name, cfg.dataset.path, cfg.dataset.settings, limit=2)
    if benchmark.runner is not None:  # a benchmark with its own stages has its own case table
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


@pytest.mark.parametrize("override", ["decoding.constrant=none", "dataset.limit=ten", "model.tensor_parallel_size=1.5"],
                         ids=["typo_key", "wrong_type_int", "wrong_type_float"])
def test_typos_and_types_fail_at_composition(override):
    with pytest.raises(ConfigCompositionException):
        _compose([override])


def test_validate_lists_every_problem_at_once(tmp_path):
    cfg = _compose(["decoding.constraint=lmfe", "dataset.settings=[p,x]", "dataset.limit=0",
                    f"model.path={tmp_path}", "engine.gpu_memory_utilization=1.5", "engine.cpu_kvcache_gib=0"])
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    message = str(err.value)
    for expected in ("decoding.constraint must be one of ['outlines', 'xgrammar', 'guidance', 'none'], got 'lmfe'",
                     "dataset.settings must be a non-empty subset of ['p', 'r', 'c'] for petoolbench, got ['p', 'x']",
                     "dataset.limit must be an integer >= 1 or null, got 0",
                     "engine.gpu_memory_utilization must be in (0, 1], got 1.5",
                     "engine.cpu_kvcache_gib must be > 0 (GiB, e.g. 0.5 or 2), got 0.0",
                     f"model.path {str(tmp_path)!r} is not a model folder: it has no config.json"):
        assert expected in message


def test_missing_model_path_is_named(tmp_path):
    cfg = _compose(["model=local", f"model.path={tmp_path / 'nope'}"])
    with pytest.raises(ConfigError, match=r"model.path .*nope' does not exist: toolsweep runs offline"):
        validate(cfg)


def test_replay_needs_predictions():
    with pytest.raises(ConfigError, match="engine.predictions '/no/such.jsonl' is not a file"):
        validate(_compose(["engine=replay", "engine.predictions=/no/such.jsonl"]))
