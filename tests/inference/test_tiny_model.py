"""The tiny seeded model the plumbing tests run: deterministic, and the embedded model's tokenizer."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from inference.models import prepare_tiny_model


def _digests(folder: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.iterdir())}


def test_two_builds_are_byte_identical_and_a_seed_changes_the_weights(tmp_path, tiny_model):
    again = prepare_tiny_model(tmp_path / "again")
    assert _digests(again) == _digests(tiny_model)
    other = prepare_tiny_model(tmp_path / "other", seed=1)
    assert _digests(other)["model.safetensors"] != _digests(tiny_model)["model.safetensors"]


def test_it_keeps_the_embedded_tokenizer_and_context(tiny_model, embedded_model):
    for name in ("tokenizer.json", "chat_template.jinja"):
        assert (tiny_model / name).read_bytes() == (embedded_model / name).read_bytes(), name
    tiny, embedded = (json.loads((f / "config.json").read_text()) for f in (tiny_model, embedded_model))
    assert (tiny["vocab_size"], tiny["max_position_embeddings"]) == (embedded["vocab_size"], embedded["max_position_embeddings"])
    assert tiny["num_hidden_layers"] == 2 and (tiny_model / "model.safetensors").stat().st_size < 40 * 2**20

