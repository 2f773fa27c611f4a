"""LoRA adapters served through vLLM: a zero adapter changes nothing, a noisy one does.

The wiring is the subject (model.lora reaches vLLM and the adapter is applied), so the adapters are
made at test time for the tiny seeded model, whose logits a rank-8 perturbation moves as surely as
the embedded model's."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import torch
from safetensors.torch import save_file

from tests.conftest import tiny_args
from tests.inference.test_end_to_end import run_toolsweep


def make_lora_adapter(base: Path, out: Path, scale: float, rank: int = 8, seed: int = 0) -> Path:
    """A PEFT-format LoRA adapter on q_proj/v_proj of every layer; lora_B ~ N(0, scale)."""
    cfg = json.loads((base / "config.json").read_text())
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads) * (hidden // heads)
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(cfg["num_hidden_layers"]):
        for module, out_dim in (("q_proj", hidden), ("v_proj", kv)):
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, hidden, generator=gen) * 0.05
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(out_dim, rank, generator=gen) * scale
    out.mkdir(parents=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    (out / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank, "lora_dropout": 0.0,
        "target_modules": ["q_proj", "v_proj"], "bias": "none", "fan_in_fan_out": False,
        "modules_to_save": None, "base_model_name_or_path": str(base)}))
    return out


@pytest.mark.vllm
def test_lora_adapter_is_applied_and_adapters_share_one_base_engine(tmp_path, tiny_model, scratch_env):
    """A zero adapter changes nothing, a noisy one does; run one after another on the warm worker
    (tests/warm.py), the adapters after the first are served by the engine the first one loaded,
    one LoRA request each: the zero adapter after the noisy one still equals the base model, and
    the noisy one again equals its own run on a fresh engine."""
    # LoRA kernels are slow on CPU: one sample, and the rank reserved no larger than the adapter's
    args = [*tiny_args(tiny_model), "dataset.limit=1", "dataset.settings=[p]", "engine.cache=false",
            "model.max_lora_rank=8", "decoding.constraint=none"]
    adapters = {"zero": make_lora_adapter(tiny_model, tmp_path / "zero", 0.0),
                "noisy": make_lora_adapter(tiny_model, tmp_path / "noisy", 3.0)}
    outputs, starts = {}, {}
    for run, adapter in (("base", None), ("noisy", "noisy"), ("zero", "zero"), ("noisy-again", "noisy")):
        extra = [] if adapter is None else [f"model.lora={adapters[adapter]}"]
        done = run_toolsweep(tmp_path / f"run-{run}", [*args, *extra], env=scratch_env)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs[run] = pl.read_parquet(tmp_path / f"run-{run}" / "samples.parquet")["output"].to_list()
        starts[run] = json.loads((tmp_path / f"run-{run}" / "run.json").read_text())["roles"]["model"]["engine_start"]
    assert starts["noisy"]["how"] == "cold" and starts["zero"]["how"] == starts["noisy-again"]["how"] == "reused"
    assert outputs["zero"] == outputs["base"]     # B = 0: the adapter adds nothing
    assert outputs["noisy"] != outputs["base"]    # so a change here is the adapter at work
    assert outputs["noisy-again"] == outputs["noisy"]


def test_lora_needs_an_adapter_folder_and_vllm(tmp_path):
    done = run_toolsweep(tmp_path / "run", ["engine=transformers", f"model.lora={tmp_path}"])
    assert done.returncode == 2
    assert "model.lora needs engine=vllm" in done.stderr
    done = run_toolsweep(tmp_path / "run2", [f"model.lora={tmp_path}"])
    assert done.returncode == 2 and "is not a LoRA adapter folder: it has no adapter_config.json" in done.stderr
