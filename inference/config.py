"""The shape of a toolsweep run: typed dataclasses registered with Hydra's ConfigStore.

Values live in YAML under conf/; this file says which keys exist and their types, so a
typo or a wrong type fails at composition, before a model loads. `validate` then checks
the values and reports every problem at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Optional

from omegaconf import MISSING

from inference.benchmarks.etapp.options import EtappConfig
from inference.errors import ConfigError
from inference.models import check_model_dir

CONSTRAINTS = ("outlines", "xgrammar", "guidance", "none")
PROMPT_FORMATS = ("benchmark", "native")
# Field metadata marking an option that changes what the model generates: every such field
# enters the generation cache key (inference.pipeline.run_context), so none can be forgotten.
OUTPUT = {"output": True}


def output_options(part: Any) -> dict[str, Any]:
    """The fields of a config dataclass marked OUTPUT, by name."""
    return {f.name: getattr(part, f.name) for f in fields(part) if f.metadata.get("output")} \
        if is_dataclass(part) else {}


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
    dtype: str = field(default="auto", metadata=OUTPUT)
    """Weights dtype for the engine (auto, bfloat16, float16, float32). auto: the model's own on a
    GPU; on a CPU bfloat16 where it has native bf16 instructions, else float32 (inference.hardware)."""
    tool_parser: Optional[str] = None
    """prompt.format=native: vLLM's tool-call parser of the model's family (hermes, llama3_json,
    mistral, ...). None: guessed from the chat template (hermes when nothing identifies it)."""
    tensor_parallel_size: int = 1
    """GPUs one model is split over (vLLM); also the GPUs each sweep job gets."""
    lora: Optional[str] = None
    """A LoRA adapter folder (adapter_config.json) served on this base model through vLLM."""
    max_lora_rank: int = 64
    """vLLM: the largest adapter rank to reserve memory for."""


@dataclass
class DatasetConfig:
    name: str = "petoolbench"
    """Benchmark (a module of inference/benchmarks/, or a dotted module path defining BENCHMARK)."""
    path: str = MISSING
    """The benchmark's file or folder (each conf/dataset/*.yaml says which)."""
    settings: list[str] = field(default_factory=lambda: ["p", "r", "c"])
    """Settings to run, a subset of the benchmark's (each conf/dataset/*.yaml lists them)."""
    limit: Optional[int] = None
    """Keep the first N records of each setting (None: all)."""
    history: str = "full"
    """History ablation (inference/history.py): full, none, last_k, shuffled."""
    history_k: int = 5
    """dataset.history=last_k: how many of the most recent items to keep."""
    history_seed: int = 0
    """dataset.history=shuffled: the seed of the orders (one per record)."""
    drop_ratings: bool = False
    """Remove every history item's `rating` (PEToolBench's `r` setting)."""


@dataclass
class EngineConfig:
    """What every engine has; each engine's own options live in its subclass."""

    name: str = MISSING
    """vllm (offline batch), transformers (HF generate + Outlines), or replay (grade a file)."""
    target: str = MISSING
    """module:Class of the engine; the class builds itself with `from_config`."""
    seed: int = field(default=0, metadata=OUTPUT)
    """Sampling seed (decoding is greedy by default, so it matters only with temperature > 0)."""
    shard_size: int = 512
    """Prompts per shard: each finished shard is written to disk, so a killed run resumes there.
    Large enough to keep vLLM's batches full."""
    cache: bool = True
    """Reuse generations across runs (keyed by model weights, prompt, grammar and every option
    that changes outputs) from $TOOLSWEEP_CACHE/generations."""

    loads_model = True
    """Generates (needs model.path for the tokenizer and chat template); replay does not."""
    needs_weights = True
    """model.path must hold the weights (False: a remote engine needs only config and tokenizer)."""
    serves_lora = False

    def model_key(self) -> dict[str, Any] | None:
        """What identifies the weights in the cache key, where model.path's content does not."""
        return None

    def problems(self) -> list[str]:
        """Every invalid value of this engine's options."""
        return [] if self.shard_size >= 1 else [f"engine.shard_size must be an integer >= 1, got {self.shard_size}"]


@dataclass
class VLLMEngineConfig(EngineConfig):
    name: str = "vllm"
    target: str = "inference.engines.vllm_offline:VLLMEngine"
    enforce_eager: Optional[bool] = None
    """Skip graph capture/compilation. None: True on CPU (init 15-35 s, not 90-120 s)."""
    gpu_memory_utilization: float = 0.9
    """Share of GPU memory for weights and KV cache."""
    max_num_seqs: int = 256
    """Sequences decoded together."""
    max_num_batched_tokens: Optional[int] = None
    """Tokens per scheduler step (prefill chunk budget). None: vLLM's default."""
    cpu_kvcache_gib: float = 2.0
    """On CPU: KV-cache size in GiB, fractions allowed (VLLM_CPU_KVCACHE_SPACE, when set,
    takes precedence in whole GiB)."""
    enable_prefix_caching: Optional[bool] = field(default=None, metadata=OUTPUT)
    """Reuse the KV of prompt prefixes seen before (None: vLLM's default, on). Off makes each
    request's numerics independent of what ran before it in the process: a resumed multi-turn run
    is then bit-identical to an uninterrupted one (on, at bf16, a reused prefix can flip a greedy
    token of a small model)."""

    serves_lora = True

    def problems(self) -> list[str]:
        found = super().problems()
        if self.max_num_seqs < 1:
            found.append(f"engine.max_num_seqs must be an integer >= 1, got {self.max_num_seqs}")
        if not 0 < self.gpu_memory_utilization <= 1:
            found.append(f"engine.gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.cpu_kvcache_gib <= 0:
            found.append(f"engine.cpu_kvcache_gib must be > 0 (GiB, e.g. 0.5 or 2), got {self.cpu_kvcache_gib}")
        return found


@dataclass
class TransformersEngineConfig(EngineConfig):
    name: str = "transformers"
    target: str = "inference.engines.hf_transformers:TransformersEngine"


@dataclass
class ReplayEngineConfig(EngineConfig):
    name: str = "replay"
    target: str = "inference.engines.replay:ReplayEngine"
    predictions: str = MISSING
    """JSONL or Parquet file of {sample_id, output} rows."""
    cache: bool = False

    loads_model = False

    def problems(self) -> list[str]:
        found = super().problems()
        if not Path(self.predictions).expanduser().is_file():
            found.append(f"engine.predictions {self.predictions!r} is not a file (JSONL or Parquet of "
                         "{sample_id, output} rows)")
        return found


@dataclass
class OpenAIEngineConfig(EngineConfig):
    name: str = "openai"
    target: str = "inference.engines.openai_server:OpenAIEngine"
    base_url: str = MISSING
    """The server's OpenAI-compatible API, ending in /v1 (e.g. http://127.0.0.1:8000/v1)."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the API key (the key itself never enters config or run.json)."""
    model: Optional[str] = None
    """The served model's id; None: the server's only model."""
    revision: str = ""
    """Your name for the weights behind the server (e.g. a checkpoint step): part of the cache key,
    with the server's model id, so a server swapped to new weights does not reuse old generations."""
    concurrency: int = 8
    """Requests in flight at once (the server batches them)."""
    timeout_s: float = 600.0
    """Seconds one request may take."""
    retries: int = 3
    """Retries, with backoff, after a connection error or a 5xx answer."""

    needs_weights = False

    def problems(self) -> list[str]:
        found = super().problems()
        if not self.base_url.startswith(("http://", "https://")):
            found.append(f"engine.base_url must be an http(s) URL ending in /v1, got {self.base_url!r}")
        if self.concurrency < 1 or self.retries < 0:
            found.append(f"engine.concurrency must be >= 1 and engine.retries >= 0, got {self.concurrency}, "
                         f"{self.retries}")
        return found

    def model_key(self) -> dict[str, Any]:
        from inference.engines.openai_server import server_identity

        return {"server": server_identity(self.base_url, os.environ.get(self.api_key_env) or None, self.model),
                "revision": self.revision}


@dataclass
class ScriptEngineConfig(EngineConfig):
    name: str = "script"
    target: str = "inference.engines.script:ScriptEngine"
    script: str = MISSING
    """JSONL of an agent's turns, no model: {"sample_id", "turn", "calls": [{"name", "arguments"}]}
    or {"sample_id", "turn", "answer"} (multi-turn benchmarks such as ETAPP)."""
    cache: bool = False

    loads_model = False

    def problems(self) -> list[str]:
        found = super().problems()
        if not Path(self.script).expanduser().is_file():
            found.append(f"engine.script {self.script!r} is not a file (JSONL of {{sample_id, turn, calls | "
                         "answer}} rows)")
        return found


ENGINE_SCHEMAS = {"vllm": VLLMEngineConfig, "transformers": TransformersEngineConfig, "replay": ReplayEngineConfig,
                  "openai": OpenAIEngineConfig, "script": ScriptEngineConfig}


@dataclass
class PromptConfig:
    format: Optional[str] = None
    """benchmark: the benchmark's answer format ({"tool_name", "parameters"}); native: the tools go
    to the chat template and the model answers in its family's tool-call format, read by vLLM's
    parser. None: what the benchmark's authors used (FamilyTool native, the others benchmark)."""


@dataclass
class DecodingConfig:
    constraint: str = field(default="outlines", metadata=OUTPUT)
    """Grammar for the answer: outlines | xgrammar | guidance | none (free decoding)."""
    max_new_tokens: int = field(default=256, metadata=OUTPUT)
    """Answer budget, as in the paper."""
    temperature: float = field(default=0.0, metadata=OUTPUT)
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
class JudgeConfig:
    """A judge model that scores what exact match cannot (ETAPP), run in its own process."""

    enabled: bool = True
    """False: stop after the agent phase (judge later with toolsweep-judge RUN_DIR)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Any local model folder; conf/config.yaml defaults to the embedded model, so it runs offline."""
    engine: VLLMEngineConfig = field(default_factory=VLLMEngineConfig)
    constraint: str = field(default="xgrammar", metadata=OUTPUT)
    """Backend of the judge's guided JSON (outlines compiles bounded strings slowly)."""
    max_new_tokens: int = field(default=2048, metadata=OUTPUT)
    analysis_chars: int = field(default=300, metadata=OUTPUT)
    """maxLength of every analysis string in the judge's JSON schema."""
    retries: int = 1
    """Extra attempts for an answer that does not parse, each with analysis strings half as long."""


@dataclass
class ToolsweepConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    engine: Any = MISSING
    """One of ENGINE_SCHEMAS (conf/engine/*.yaml picks it)."""
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    etapp: EtappConfig = field(default_factory=EtappConfig)
    """ETAPP's own options (inference/benchmarks/etapp/options.py)."""
    quiet: bool = False
    """Hide the progress bars (logs still go to run.log)."""
    verbose: bool = False
    """Show vLLM's, torch's and transformers' log lines on the console too (they always go to run.log)."""
    max_error_rate: float = 0.1
    """The run fails (outputs still written) when more than this share of samples errored:
    too_long prompts, engine or grammar errors, empty outputs."""


def register_configs() -> None:
    """Register the schemas that conf/config.yaml and the group files extend."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(name="toolsweep_schema", node=ToolsweepConfig)
    for name, schema in ENGINE_SCHEMAS.items():
        store.store(group="engine", name=f"{name}_schema", node=schema)


def validate(cfg: ToolsweepConfig) -> None:
    """Raise one ConfigError listing every invalid value (the model is not loaded yet)."""
    problems = [*_check_choices(cfg), *_check_numbers(cfg), *_check_paths(cfg)]
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))


def _check_choices(cfg: ToolsweepConfig) -> list[str]:
    from inference.benchmarks import get_benchmark
    from inference.errors import DatasetError

    problems = []
    from inference.history import HISTORY_MODES

    for key, value, allowed in (("decoding.constraint", cfg.decoding.constraint, CONSTRAINTS),
                                ("dataset.history", cfg.dataset.history, HISTORY_MODES),
                                ("prompt.format", cfg.prompt.format, (*PROMPT_FORMATS, None))):
        if value not in allowed:
            problems.append(f"{key} must be one of {list(allowed)}, got {value!r}")
    try:
        known = list(get_benchmark(cfg.dataset.name).settings)
    except DatasetError as exc:
        problems.append(str(exc))
        known = []
    bad = [s for s in cfg.dataset.settings if s not in known]
    if known and (bad or not cfg.dataset.settings):
        problems.append(f"dataset.settings must be a non-empty subset of {known} for "
                        f"{cfg.dataset.name}, got {list(cfg.dataset.settings)}")
    elif len(set(cfg.dataset.settings)) != len(cfg.dataset.settings):
        problems.append(f"dataset.settings lists a setting twice: {list(cfg.dataset.settings)}")
    return problems


def _check_numbers(cfg: ToolsweepConfig) -> list[str]:
    checks = (("dataset.limit", cfg.dataset.limit, 1, True),
              ("dataset.history_k", cfg.dataset.history_k, 0, False),
              ("decoding.max_new_tokens", cfg.decoding.max_new_tokens, 1, False),
              ("model.tensor_parallel_size", cfg.model.tensor_parallel_size, 1, False),
              ("model.max_model_len", cfg.model.max_model_len, 2, True),
              ("decoding.compile_timeout_s", cfg.decoding.compile_timeout_s, 1, False),
              ("decoding.max_string_chars", cfg.decoding.max_string_chars, 1, True))
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
    return problems + cfg.engine.problems()


def _check_paths(cfg: ToolsweepConfig) -> list[str]:
    problems = []
    if not Path(cfg.dataset.path).expanduser().exists():
        from inference.benchmarks import get_benchmark
        from inference.errors import DatasetError

        try:
            hint = get_benchmark(cfg.dataset.name).path_hint
        except DatasetError:
            hint = "the benchmark's file or folder"
        problems.append(f"dataset.path {cfg.dataset.path!r} does not exist; point dataset.path at {hint}")
    if cfg.engine.loads_model:
        try:
            check_model_dir(cfg.model.path, weights=cfg.engine.needs_weights)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems + _check_lora(cfg)


def _check_lora(cfg: ToolsweepConfig) -> list[str]:
    if cfg.model.lora is None:
        return []
    if not cfg.engine.serves_lora:
        return [f"model.lora needs engine=vllm (vLLM serves adapters); got engine={cfg.engine.name}"]
    if not (Path(cfg.model.lora).expanduser() / "adapter_config.json").is_file():
        return [f"model.lora {cfg.model.lora!r} is not a LoRA adapter folder: it has no "
                "adapter_config.json"]
    return []


def typed_config(data: dict[str, Any]) -> ToolsweepConfig:
    """A resolved config (as `OmegaConf.to_container` wrote it, e.g. into a run dir) back into the
    typed dataclasses, with the engine's own schema; unknown keys or wrong types fail here."""
    from omegaconf import OmegaConf

    engine = dict(data.get("engine") or {})
    schema = ENGINE_SCHEMAS.get(engine.get("name"))
    if schema is None:
        raise ConfigError(f"engine.name must be one of {list(ENGINE_SCHEMAS)}, got {engine.get('name')!r}")
    rest = {k: v for k, v in data.items() if k != "engine"}
    merged = OmegaConf.merge(OmegaConf.structured(ToolsweepConfig), rest)
    merged.engine = OmegaConf.merge(OmegaConf.structured(schema), engine)
    return OmegaConf.to_object(merged)
