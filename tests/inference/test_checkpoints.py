"""Which checkpoints a loaded engine may take in place: provably the same shape, or a fresh engine
with the reason (inference/checkpoints.py; no engine here)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from inference.checkpoints import CONFIG_FIELDS_IGNORED, shape_key, swap_problems
from inference.models import prepare_tiny_model


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("checkpoints")
    return prepare_tiny_model(root / "a", seed=0), prepare_tiny_model(root / "b", seed=1)


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def _edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def test_two_trainings_steps_of_one_model_swap(two_seeds):
    a, b = two_seeds
    assert swap_problems(a, b) == []
    assert shape_key(a) == shape_key(b) is not None


def test_names_and_versions_in_the_config_do_not_stop_a_swap(two_seeds, tmp_path):
    b = _copy(two_seeds[1], tmp_path / "b")
    _edit_config(b, _name_or_path="/elsewhere/step-900", transformers_version="9.9.9")
    assert {"_name_or_path", "transformers_version"} <= set(CONFIG_FIELDS_IGNORED)
    assert swap_problems(two_seeds[0], b) == [] and shape_key(b) == shape_key(two_seeds[0])


def test_a_config_value_that_changes_outputs_is_never_swapped(two_seeds, tmp_path):
    b = _copy(two_seeds[1], tmp_path / "b")
    config = json.loads((b / "config.json").read_text())
    rope = config.get("rope_parameters") or {}
    _edit_config(b, rope_parameters={**rope, "rope_theta": 1234.0})
    problems = swap_problems(two_seeds[0], b)
    assert len(problems) == 1 and problems[0].startswith("config.json differs in rope_parameters"), problems
    assert shape_key(b) != shape_key(two_seeds[0])


@pytest.mark.parametrize("name", ["tokenizer_config.json", "generation_config.json"])
def test_a_tokenizer_template_or_generation_default_that_differs_is_never_swapped(two_seeds, tmp_path, name):
    b = _copy(two_seeds[1], tmp_path / "b")
    assert (b / name).is_file(), f"the tiny model has no {name}: this test would prove nothing"
    (b / name).write_text((b / name).read_text().replace("}", ', "x_changed": 1}', 1))
    assert swap_problems(two_seeds[0], b) == [f"{name} differs"]


def test_a_truncated_weights_file_is_refused_before_any_load(two_seeds, tmp_path):
    b = _copy(two_seeds[1], tmp_path / "b")
    weights = b / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4096])
    [problem] = swap_problems(two_seeds[0], b)
    assert "truncated" in problem and str(weights) in problem
    assert shape_key(b) is None


def test_weights_stored_in_another_dtype_are_never_swapped(two_seeds, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    b = _copy(two_seeds[1], tmp_path / "b")
    tensors = load_file(b / "model.safetensors")
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].to(torch.bfloat16)
    save_file(tensors, b / "model.safetensors", metadata={"format": "pt"})
    [problem] = swap_problems(two_seeds[0], b)
    assert problem.startswith("the weights' tensors differ in name, shape or dtype (1: " + name), problem


def test_an_adapter_or_no_safetensors_are_never_swapped(two_seeds, tmp_path):
    adapter = _copy(two_seeds[1], tmp_path / "adapter")
    (adapter / "adapter_config.json").write_text("{}")
    assert "is not a folder of safetensors weights" in swap_problems(two_seeds[0], adapter)[0]
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text((two_seeds[0] / "config.json").read_text())
    assert "is not a folder of safetensors weights" in swap_problems(two_seeds[0], bare)[0]
    assert swap_problems(two_seeds[0], tmp_path / "missing") != []


class FakeEngine:
    """An engine with vLLM's pool interface, whose swap fails on request (no vLLM here)."""

    fail_swap = False

    def __init__(self, path: str) -> None:
        self.path, self.swapped_to = path, []

    @classmethod
    def from_config(cls, engine_cfg, context) -> "FakeEngine":
        return cls(str(context.model.path))

    @classmethod
    def reuse_key(cls, engine_cfg, context) -> str:
        return str(context.model.path)

    @classmethod
    def swap_key(cls, engine_cfg, context) -> str:
        return "one shape"

    def swap(self, context) -> None:
        if self.fail_swap:
            raise OSError("the weights file went away mid-read")
        self.swapped_to.append(str(context.model.path))

    def rebind(self, context) -> None:
        pass


def _context(path: Path):
    from types import SimpleNamespace

    from inference.engines import EngineContext

    return EngineContext(model=SimpleNamespace(path=str(path)), decoding=None, max_model_len=None, sample_ids=[])


def test_the_pool_swaps_a_same_shaped_checkpoint_and_says_why_it_did_not(two_seeds, tmp_path):
    from inference.engines import EnginePool

    target = f"{__name__}:FakeEngine"
    pool = EnginePool()
    pool.enabled = True
    a, b = two_seeds
    first = pool.obtain(target, None, _context(a))
    assert pool.last_start == "cold"
    assert pool.obtain(target, None, _context(b)) is first and first.swapped_to == [str(b)]
    assert pool.last_start == "swapped" and pool.last_reason is None
    assert pool.obtain(target, None, _context(b)) is first and pool.last_start == "reused"
    rope = _copy(b, tmp_path / "rope")
    _edit_config(rope, rope_parameters={"rope_theta": 1.0})
    other = pool.obtain(target, None, _context(rope))
    assert other is not first and pool.last_start == "cold"
    assert pool.last_reason.startswith("config.json differs in rope_parameters"), pool.last_reason


def test_a_swap_that_fails_part_way_fails_its_job_and_marks_the_worker_broken(two_seeds, monkeypatch):
    from inference.engines import EnginePool
    from inference.errors import EngineError

    target = f"{__name__}:FakeEngine"
    pool = EnginePool()
    pool.enabled = True
    pool.obtain(target, None, _context(two_seeds[0]))
    monkeypatch.setattr(FakeEngine, "fail_swap", True)
    with pytest.raises(EngineError, match="the weights file went away mid-read.*next job starts a new worker"):
        pool.obtain(target, None, _context(two_seeds[1]))
    assert pool.broken and pool.engine is None and pool.key is None


class FakeReplay:
    """An engine that loads no model (as replay, a script or a server's client)."""

    @classmethod
    def from_config(cls, engine_cfg, context) -> "FakeReplay":
        return cls()


def test_an_engine_free_job_between_two_leaves_the_kept_engine(two_seeds, monkeypatch):
    """A race's round runs the replayed candidates, then the model's: the model's engine stays."""
    import sys
    from types import ModuleType, SimpleNamespace

    from inference.engines import EnginePool

    module = ModuleType("engine_free_probe")
    module.CONFIG = SimpleNamespace(needs_weights=False)
    module.FakeReplay = type("FakeReplay", (FakeReplay,), {"__module__": module.__name__})
    monkeypatch.setitem(sys.modules, "engine_free_probe", module)
    pool = EnginePool()
    pool.enabled = True
    a, _ = two_seeds
    kept = pool.obtain(f"{__name__}:FakeEngine", None, _context(a))
    assert isinstance(pool.obtain("engine_free_probe:FakeReplay", None, _context(a)), FakeReplay)
    assert pool.obtain(f"{__name__}:FakeEngine", None, _context(a)) is kept and pool.last_start == "reused"
