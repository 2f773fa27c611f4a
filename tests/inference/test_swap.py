"""A checkpoint read into a loaded engine answers as a fresh engine on it would: token for token,
logprob for logprob (inference/engines/vllm_offline.py VLLMEngine.swap), on the embedded model,
whose tied lm_head the CPU build computes from a packed copy of its own. (The tiny model, tied too,
is `tiny` here and swapped in a sweep against cold engines in tests/inference/test_warm_workers.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.warm import forked

PROBE = "tests.inference.swap_probe"


def _probe(out: Path, steps: list[str], env: dict[str, str]) -> list[dict]:
    """The probe in a process of its own (a fresh engine), forked from a template that imported
    torch and vLLM once (tests/warm.py `forked`) instead of a new interpreter importing them."""
    probe = forked([str(out), *steps], env, name="swap-probe", module=PROBE)
    said = probe.stdout.read().decode("utf-8", "replace")
    probe.stdout.close()
    assert probe.wait(900) == 0, said[-3000:]
    return json.loads(out.read_text())


def _answers(record: dict) -> dict:
    return {part: record[part] for part in ("computed", "from_cache")}


def perturbed(source: Path, target: Path, seed: int) -> Path:
    """Another training step of `source` (scripts/checkpoint_variants.py, which `make bench` uses too)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("checkpoint_variants", REPO / "scripts" / "checkpoint_variants.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.perturbed(source, target, seed)


@pytest.fixture(scope="module")
def checkpoints(request, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("swap")
    if request.param == "tiny":
        from inference.models import prepare_tiny_model

        return request.getfixturevalue("tiny_model"), prepare_tiny_model(root / "b", seed=1)
    base = request.getfixturevalue("embedded_model")
    return base, perturbed(base, root / "b", seed=0)


@pytest.mark.vllm
@pytest.mark.parametrize("checkpoints", ["embedded"], indirect=True)
def test_a_swapped_checkpoint_answers_as_a_fresh_engine_and_back(checkpoints, tmp_path, scratch_env):
    """A -> B -> A on one engine equals fresh engines on B and A; B read in without refreshing the
    packed lm_head, or without resetting the prefix cache (A's blocks in it), answers otherwise."""
    a, b = (str(path) for path in checkpoints)
    swapped = _probe(tmp_path / "swapped.json", [a, b, a, f"{b}:skip-refresh", a, f"{b}:skip-reset"], scratch_env)
    fresh_b = _probe(tmp_path / "fresh.json", [b], scratch_env)[0]
    first_a, on_b, back_on_a, unrefreshed, again_a, unreset = swapped
    assert _answers(first_a) != _answers(fresh_b), "the two checkpoints answer alike: this test would prove nothing"
    assert _answers(on_b) == _answers(fresh_b)
    assert _answers(back_on_a) == _answers(first_a) == _answers(again_a)
    assert "lm_head" in on_b["refreshed"] and on_b["refreshed"] == back_on_a["refreshed"], "the tied lm_head packed again"
    # in the probe's dtype the CPU build computes the lm_head from a packed copy on every CPU kind
    assert unrefreshed["computed"] != fresh_b["computed"], "a swap without the lm_head refresh went unseen"
    assert unreset["computed"] == fresh_b["computed"]
    assert all(record["cached"] > 0 for record in unreset["from_cache"])
    assert unreset["from_cache"] != fresh_b["from_cache"], "a swap without the prefix-cache reset went unseen"
