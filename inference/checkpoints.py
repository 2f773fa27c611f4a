"""Whether a loaded engine may take another checkpoint's weights in place (a warm worker's swap).

Only where it is provably the same model shape: the weights are re-read into the engine's memory
and nothing else is, so everything vLLM read once at start (the config, the tokenizer, the chat
template, the generation defaults) and every tensor's name, shape and dtype must be equal. Anything
else takes a fresh engine, for the reason given here. No vLLM or torch import: the launcher orders a
sweep's jobs by these fingerprints before any engine exists.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any, Optional

CONFIG_FIELDS_IGNORED = ("_name_or_path", "name_or_path", "transformers_version", "_commit_hash")
"""config.json fields that name or date a checkpoint and change nothing vLLM computes: two
checkpoints of one training run differ in them and still swap."""

READ_AT_START = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                 "vocab.json", "merges.txt", "tokenizer.model", "chat_template.jinja", "chat_template.json",
                 "generation_config.json", "preprocessor_config.json", "quantize_config.json",
                 "quant_config.json")
"""Files an engine reads once when it starts (tokenizer, chat template, default sampling, a
quantizer's settings): a checkpoint swapped in must have the same ones, byte for byte."""

MAX_HEADER_BYTES = 100 * 2**20
"""A safetensors header is JSON of a few hundred bytes per tensor; more is not a safetensors file."""


def _header(path: Path) -> dict[str, Any]:
    """The tensors one safetensors file declares: name -> (dtype, shape) (its data is not read)."""
    with open(path, "rb") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path} is not a safetensors file: shorter than its 8-byte header length")
        (size,) = struct.unpack("<Q", raw)
        if size > MAX_HEADER_BYTES:
            raise ValueError(f"{path} declares a {size}-byte header (over {MAX_HEADER_BYTES}): not a safetensors file")
        header = json.loads(handle.read(size))
    header.pop("__metadata__", None)
    end = max((entry["data_offsets"][1] for entry in header.values()), default=0)
    if path.stat().st_size != 8 + size + end:
        raise ValueError(f"{path} holds {path.stat().st_size} bytes where its header declares {8 + size + end}: "
                         "truncated or damaged (copy it again)")
    return {name: [entry["dtype"], entry["shape"]] for name, entry in header.items()}


def fingerprint(folder: Path | str) -> Optional[dict[str, Any]]:
    """Everything an engine's shape depends on in a checkpoint folder, or None where no swap can be
    proved safe (not a folder, no config.json or no safetensors weights, an adapter)."""
    folder = Path(folder)
    if not folder.is_dir() or not (folder / "config.json").is_file() or (folder / "adapter_config.json").exists():
        return None
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        return None
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tensors: dict[str, Any] = {}
    for path in weights:
        tensors.update(_header(path))
    return {
        "config": {key: value for key, value in config.items() if key not in CONFIG_FIELDS_IGNORED},
        "files": {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
                  for name in READ_AT_START if (folder / name).is_file()},
        "tensors": tensors,
    }


def swap_problems(loaded: Path | str, wanted: Path | str) -> list[str]:
    """Why checkpoint `wanted` cannot be swapped into an engine that loaded `loaded` (empty: it can)."""
    try:
        old, new = fingerprint(loaded), fingerprint(wanted)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"a checkpoint could not be read ({type(exc).__name__}: {exc})"]
    if old is None or new is None:
        which = wanted if new is None else loaded
        return [f"{which} is not a folder of safetensors weights with a config.json (or holds an adapter): "
                "only such checkpoints are swapped in place"]
    problems = [f"config.json differs in {key}: {old['config'].get(key)!r} -> {new['config'].get(key)!r}"
                for key in sorted(set(old["config"]) | set(new["config"])) if old["config"].get(key) != new["config"].get(key)]
    problems += [f"{name} differs" for name in sorted(set(old["files"]) | set(new["files"]))
                 if old["files"].get(name) != new["files"].get(name)]
    if old["tensors"] != new["tensors"]:
        changed = sorted(name for name in set(old["tensors"]) | set(new["tensors"])
                         if old["tensors"].get(name) != new["tensors"].get(name))
        problems.append(f"the weights' tensors differ in name, shape or dtype ({len(changed)}: "
                        f"{', '.join(changed[:3])}{' ...' if len(changed) > 3 else ''})")
    return problems


def shape_key(folder: Path | str) -> Optional[str]:
    """A short digest of `fingerprint`: equal for checkpoints that swap into one another's engine."""
    try:
        found = fingerprint(folder)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if found is None:
        return None
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()[:16]
