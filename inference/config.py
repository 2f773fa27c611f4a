"""The shape of a toolsweep run: typed dataclasses registered with Hydra's ConfigStore.

Values live in YAML under conf/; this file says which keys exist and their types, so a
typo or a wrong type fails at composition, before a model loads. `validate` then checks
the values and reports every problem at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from omegaconf import MISSING

from inference.errors import ConfigError
from inference.models import check_model_dir

CONSTRAINTS = ("outlines", "xgrammar", "guidance", "none")
ENGINES = ("vllm", "transformers", "replay")


@dataclass
class ModelConfig:
    path: str = MISSING
    """Local model folder (config.json, tokenizer, weights). Never a hub id: runs are offline."""
    name: str = ""
    """Display name in reports; defaults to the folder name."""
    embedded: bool = False
    """True for the bundled SmolLM2 model: its folder is built from the packaged GGUF if missing."""
    max_model_len: Optional[int] = None
    """Context length (prompt + answer). Default: the model's max_position_embeddings."""
    dtype: str = "auto"
    """Weights dtype for the engine (auto, bfloat16, float16, float32)."""
    tensor_parallel_size: int = 1
    """GPUs one model is split over (vLLM); also the GPUs each sweep job gets."""
    lora: Optional[str] = None
    """A LoRA adapter folder (adapter_config.json) served on this base model through vLLM."""
    max_lora_rank: int = 64
    """vLLM: the largest adapter rank to reserve memory for."""


@dataclass
class DatasetConfig:
    name: str = "petoolbench"
    """Benchmark adapter that reads the files: petoolbench, familytool or toolspectrum."""
    path: str = MISSING
    """The benchmark's file or folder (each conf/dataset/*.yaml says which)."""
    settings: list[str] = field(default_factory=lambda: ["p", "r", "c"])
    """Settings to run, a subset of the benchmark's (each conf/dataset/*.yaml lists them)."""
    limit: Optional[int] = None
    """Keep the first N records of each setting (None: all)."""


@dataclass
class EngineConfig:
    name: str = "vllm"
    """vllm (offline batch), transformers (HF generate + Outlines), or replay (grade a file)."""
    predictions: Optional[str] = None
    """replay only: JSONL or Parquet file of {sample_id, output} rows."""
    enforce_eager: Optional[bool] = None
    """vLLM: skip graph capture/compilation. None: True on CPU (init 15-35 s, not 90-120 s)."""
    gpu_memory_utilization: float = 0.9
    """vLLM: share of GPU memory for weights and KV cache."""
    max_num_seqs: int = 256
    """vLLM: sequences decoded together."""
    max_num_batched_tokens: Optional[int] = None
    """vLLM: tokens per scheduler step (prefill chunk budget). None: vLLM's default."""
    cpu_kvcache_gib: int = 2
    """vLLM on CPU: KV-cache size in GiB (VLLM_CPU_KVCACHE_SPACE)."""
    seed: int = 0
    """Sampling seed (decoding is greedy by default, so it matters only with temperature > 0)."""
    shard_size: int = 512
    """Prompts per shard: each finished shard is written to disk, so a killed run resumes there.
    Large enough to keep vLLM's batches full."""
    cache: bool = True
    """Reuse generations across runs (keyed by model weights, prompt, sampling, constraint and
    versions) from $TOOLSWEEP_CACHE/generations."""


@dataclass
class DecodingConfig:
    constraint: str = "outlines"
    """Grammar for the answer: outlines | xgrammar | guidance | none (free decoding)."""
    max_new_tokens: int = 256
    """Answer budget, as in the paper."""
    temperature: float = 0.0
    """0 = greedy, as the paper's scoring assumes."""
    compile_timeout_s: int = 60
    """Seconds one grammar may take to compile before its sample fails (vLLM's default, 5 s,
    fails real PEToolBench schemas under outlines: they take 0.2-6 s on a 49k vocabulary)."""
    max_string_chars: Optional[int] = None
    """xgrammar and guidance: cap every string value of the call at this many characters (default
    128), so a model looping inside a string still closes the call within max_new_tokens.
    Not under outlines: a cap grows its automaton past what compiles in time."""
    drop_oldest_history: bool = False
    """A prompt too long for the context: drop its oldest history items (True) or record a too_long row."""


@dataclass
class ToolsweepConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    quiet: bool = False
    """Hide the progress bar and the engine's own log lines."""
    max_error_rate: float = 0.1
    """The run fails (outputs still written) when more than this share of samples errored:
    too_long prompts, engine or grammar errors, empty outputs."""


def register_configs() -> None:
    """Register the schemas that conf/config.yaml and the group files extend."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(name="toolsweep_schema", node=ToolsweepConfig)


def validate(cfg: ToolsweepConfig) -> None:
    """Raise one ConfigError listing every invalid value (the model is not loaded yet)."""
    problems = [*_check_choices(cfg), *_check_numbers(cfg), *_check_paths(cfg)]
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))


def _check_choices(cfg: ToolsweepConfig) -> list[str]:
    from inference.adapters import adapters

    benchmarks = adapters()
    problems = []
    for key, value, allowed in (("decoding.constraint", cfg.decoding.constraint, CONSTRAINTS),
                                ("engine.name", cfg.engine.name, ENGINES),
                                ("dataset.name", cfg.dataset.name, tuple(benchmarks))):
        if value not in allowed:
            problems.append(f"{key} must be one of {list(allowed)}, got {value!r}")
    known = list(benchmarks[cfg.dataset.name].settings) if cfg.dataset.name in benchmarks else []
    bad = [s for s in cfg.dataset.settings if s not in known]
    if known and (bad or not cfg.dataset.settings):
        problems.append(f"dataset.settings must be a non-empty subset of {known} for "
                        f"{cfg.dataset.name}, got {list(cfg.dataset.settings)}")
    elif len(set(cfg.dataset.settings)) != len(cfg.dataset.settings):
        problems.append(f"dataset.settings lists a setting twice: {list(cfg.dataset.settings)}")
    return problems


def _check_numbers(cfg: ToolsweepConfig) -> list[str]:
    checks = (("dataset.limit", cfg.dataset.limit, 1, True),
              ("decoding.max_new_tokens", cfg.decoding.max_new_tokens, 1, False),
              ("model.tensor_parallel_size", cfg.model.tensor_parallel_size, 1, False),
              ("model.max_model_len", cfg.model.max_model_len, 2, True),
              ("engine.max_num_seqs", cfg.engine.max_num_seqs, 1, False),
              ("decoding.compile_timeout_s", cfg.decoding.compile_timeout_s, 1, False),
              ("decoding.max_string_chars", cfg.decoding.max_string_chars, 1, True),
              ("engine.shard_size", cfg.engine.shard_size, 1, False))
    problems = [f"{key} must be an integer >= {low}{' or null' if nullable else ''}, got {value!r}"
                for key, value, low, nullable in checks
                if not (value is None and nullable) and (value is None or value < low)]
    if cfg.decoding.max_string_chars is not None and cfg.decoding.constraint in ("outlines", "none"):
        problems.append(f"decoding.max_string_chars={cfg.decoding.max_string_chars} needs decoding.constraint="
                        f"xgrammar or guidance, got {cfg.decoding.constraint!r}: under outlines a string cap "
                        "grows the automaton past what compiles in time (a 32-character cap on a FamilyTool "
                        "schema overflowed vLLM's grammar cache); drop the cap or switch the constraint")
    if cfg.decoding.temperature < 0:
        problems.append(f"decoding.temperature must be >= 0, got {cfg.decoding.temperature}")
    if not 0 <= cfg.max_error_rate <= 1:
        problems.append(f"max_error_rate must be in [0, 1], got {cfg.max_error_rate}")
    if not 0 < cfg.engine.gpu_memory_utilization <= 1:
        problems.append(f"engine.gpu_memory_utilization must be in (0, 1], got "
                        f"{cfg.engine.gpu_memory_utilization}")
    return problems


def _check_paths(cfg: ToolsweepConfig) -> list[str]:
    problems = []
    if not Path(cfg.dataset.path).expanduser().exists():
        from inference.adapters import adapters

        hint = getattr(adapters().get(cfg.dataset.name), "path_hint", "the benchmark's file or folder")
        problems.append(f"dataset.path {cfg.dataset.path!r} does not exist; point dataset.path at {hint}")
    if cfg.engine.name == "replay":
        if not cfg.engine.predictions:
            problems.append("engine=replay needs engine.predictions=FILE (JSONL or Parquet of "
                            "{sample_id, output} rows)")
        elif not Path(cfg.engine.predictions).expanduser().is_file():
            problems.append(f"engine.predictions {cfg.engine.predictions!r} is not a file")
    else:
        try:
            check_model_dir(cfg.model.path)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems + _check_lora(cfg)


def _check_lora(cfg: ToolsweepConfig) -> list[str]:
    if cfg.model.lora is None:
        return []
    if cfg.engine.name != "vllm":
        return [f"model.lora needs engine=vllm (vLLM serves adapters); got engine={cfg.engine.name}"]
    if not (Path(cfg.model.lora).expanduser() / "adapter_config.json").is_file():
        return [f"model.lora {cfg.model.lora!r} is not a LoRA adapter folder: it has no "
                "adapter_config.json"]
    return []
