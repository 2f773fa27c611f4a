"""Checkpoint folders made from another one, for `make bench` (section `warm`) and the swap tests:
another training step (weights moved by seeded noise), a truncated copy, a copy whose config
differs in its RoPE base. Each writes a new folder and never touches its source (a script, not a
package module: torch is imported here, which inference/checkpoints.py must not do)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path


def perturbed(source: Path, target: Path, seed: int) -> Path:
    """Another training step of `source`: every tensor moved a little (the embedding, and so the
    tied lm_head, included), config and tokenizer files copied unchanged."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.safetensors"))
    generator = torch.Generator().manual_seed(seed)
    for weights in source.glob("*.safetensors"):
        tensors = load_file(weights)
        moved = {name: (tensor.float() + 0.02 * tensor.float().std() * torch.randn(tensor.shape, generator=generator))
                 .to(tensor.dtype) for name, tensor in tensors.items()}
        save_file(moved, target / weights.name, metadata={"format": "pt"})
    return target


def truncated(source: Path, target: Path, weights: str = "model.safetensors") -> Path:
    """A copy of `source` whose `weights` file holds only the first half of its bytes (a copy
    interrupted part-way): its header still declares every tensor."""
    shutil.copytree(source, target)
    path = target / weights
    if not path.is_file():
        raise FileNotFoundError(f"{source} has no {weights} to truncate: name one of "
                                f"{sorted(p.name for p in source.glob('*.safetensors'))}")
    os.truncate(path, path.stat().st_size // 2)
    return target


def rope_theta_changed(source: Path, target: Path, factor: float = 0.1) -> Path:
    """A copy of `source` whose config.json has its RoPE base (`rope_theta`, top-level or under
    `rope_parameters`, whichever the config has) times `factor`; the weights are the same bytes."""
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    holder = config if "rope_theta" in config else config.get("rope_parameters") or {}
    if "rope_theta" not in holder:
        raise KeyError(f"{source / 'config.json'} has no rope_theta (top-level or in rope_parameters): "
                       "this variant needs a RoPE model")
    shutil.copytree(source, target)
    holder["rope_theta"] = float(holder["rope_theta"]) * factor
    (target / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return target
