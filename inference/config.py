"""The shape of a toolsweep run: typed dataclasses.

Values live in YAML under conf/; this file says which keys exist and their types. The root
schema is registered with Hydra's ConfigStore, so a typo in a root option fails at composition;
the parts whose shape depends on a choice are typed right after composition, before any model
loads: `dataset` by the chosen benchmark's own options class (`Benchmark.options`), every
`engine` by the options class of the engine its `target` names (the engine module's `CONFIG`),
`roles.<name>` (the models a benchmark uses besides the evaluated one, e.g. a judge) as
model + engine + decoding like the evaluated model. An option the chosen part does not have is
an error that names it. `validate` then checks the values and reports every problem at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Optional

from omegaconf import MISSING

from inference.errors import ConfigError
from inference.models import check_model_dir

CONSTRAINTS = ("outlines", "xgrammar", "guidance", "none")
BENCHMARK_FORMAT, NATIVE_FORMAT = "benchmark", "native"
PROMPT_FORMATS = (BENCHMARK_FORMAT, NATIVE_FORMAT)
# What a role's constrained answers are, for an engine that cannot apply every grammar (engine=chat):
# one JSON object (a judge, a single-call answer in the benchmark's format), the model family's tool
# calls (prompt.format=native), or an agent's turn (text or calls; one ReAct step).
JSON_ANSWER, CALLS_ANSWER, AGENT_TURN = "json", "calls", "agent_turn"
GRAMMAR_ANSWER = "grammar"
"""A benchmark-format answer described by a Lark grammar (the benchmark's `answer_grammar`)."""
GRAMMAR_CONSTRAINTS = ("xgrammar", "guidance")
"""The decoding.constraint backends that take a Lark grammar (vLLM's `grammar` field); outlines takes none."""
# Field metadata marking an option that changes what the model generates: every such field
# enters the generation cache key (inference.generation.key_context), so none can be forgotten.
OUTPUT = {"output": True}
DEFAULT_SHARD_SIZE = 512
"""Prompts per shard where neither engine.shard_size nor the engine chooses."""


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
    quantization: Optional[str] = field(default=None, metadata=OUTPUT)
    """vLLM's quantization method (fp8, fp8_per_channel, awq, gptq, bitsandbytes, ...). None: what the
    checkpoint's config.json declares (an AWQ or GPTQ folder quantizes itself), else none."""
    load_format: str = field(default="auto", metadata=OUTPUT)
    """vLLM's weight loader (auto, safetensors, bitsandbytes, gguf, ...)."""


@dataclass
class DatasetConfig:
    """What every benchmark's dataset options have; a benchmark's own live in its subclass
    (`Benchmark.options`), so an option it does not use is refused, never ignored."""

    name: str = MISSING
    """Benchmark (a module of inference/benchmarks/, or a dotted module path defining BENCHMARK)."""
    path: str = MISSING
    """The benchmark's file or folder (each conf/dataset/*.yaml says which)."""
    settings: list[str] = field(default_factory=list)
    """Settings to run, a subset of the benchmark's (each conf/dataset/*.yaml lists them; empty: all)."""
    limit: Optional[int] = None
    """Keep the first N samples of each setting (None: all)."""
    shards: int = 1
    """Split the run into this many parts, each its own job (`-m dataset.shards=3
    dataset.shard=range(3)`); the sweep's end merges them into one run (inference/shards.py)."""
    shard: Optional[int] = None
    """Which part (0..shards-1) this run takes: a stable choice by a hash of the sample id (the
    benchmark's shard key). None: all of them."""
    subsample: Optional[int] = None
    """Keep this many records, the first of one seeded order stratified by setting (a case's
    records together, by the benchmark's shard key), so a smaller subsample lies inside a larger
    one: a racing sweep's rounds (hydra/sweeper=race). Taken from all the records before
    dataset.shard splits them, so a sharded candidate's parts together hold the subsample. None: all."""
    subsample_seed: int = 0
    """The seed of dataset.subsample's order (a racing sweep passes hydra.sweeper.seed)."""

    def problems(self) -> list[str]:
        """Every invalid value of the benchmark's own options (its subclass adds its checks)."""
        return []

    def shard_problems(self) -> list[str]:
        if self.subsample is not None and self.subsample < 1:
            return [f"dataset.subsample must be an integer >= 1 or null, got {self.subsample}"]
        if self.shards < 1:
            return [f"dataset.shards must be an integer >= 1, got {self.shards}"]
        if self.shard is not None and not 0 <= self.shard < self.shards:
            return [f"dataset.shard={self.shard} must be in 0..{self.shards - 1} (dataset.shards={self.shards}); "
                    f"sweep them with -m dataset.shards={self.shards} dataset.shard=range({self.shards})"]
        if self.shard is None and self.shards > 1:
            return [f"dataset.shards={self.shards} needs dataset.shard: run the parts as a sweep, "
                    f"-m dataset.shards={self.shards} dataset.shard=range({self.shards})"]
        return []


@dataclass
class EngineConfig:
    """What every engine has; each engine's own options live in its subclass."""

    name: str = MISSING
    """vllm (offline batch), transformers (HF generate + Outlines), openai (a server, token ids),
    chat (a chat-completions server), replay (grade a file), script (scripted agent turns)."""
    target: str = MISSING
    """module:Class of the engine; the class builds itself with `from_config`, and its module's
    `CONFIG` is the options class that types it."""

    loads_model = False
    """Generates (needs model.path for the tokenizer and chat template); replay does not."""
    answers = "prompts"
    """What the engine answers: `prompts` (a model), `samples` (replay: one stored answer per
    sample) or `turns` (a scripted agent); a benchmark lists the kinds its solvers can use."""
    needs_weights = False
    """model.path must hold the weights (False: a remote engine needs only config and tokenizer)."""
    serves_lora = False
    runs_quantized = False
    """Applies model.quantization, model.load_format (vLLM in this process)."""
    sends_chat = False
    """The engine sends the chat itself (messages and tools), not the rendered prompt: requests
    carry `chat_json` (engine=chat)."""

    @property
    def renders_locally(self) -> bool:
        """Prompts are rendered here with model.path's tokenizer and chat template (so model.path
        must hold them), for token counts and the context check."""
        return self.loads_model

    def constraint_problems(self, prefix: str, decoding: "DecodingConfig", answers: str) -> list[str]:
        """Every problem applying the role's `decoding.constraint` to its answers, which are
        `answers` (JSON_ANSWER, CALLS_ANSWER, AGENT_TURN or GRAMMAR_ANSWER); every engine but a chat server's
        applies them all."""
        return []

    def model_key(self) -> dict[str, Any] | None:
        """What identifies the weights in the cache key, where model.path's content does not."""
        return None

    def problems(self) -> list[str]:
        """Every invalid value of this engine's options."""
        return []


@dataclass
class GeneratingEngineConfig(EngineConfig):
    """What every engine that runs a model has: shards and the shared cache."""

    shard_size: Optional[int] = None
    """Prompts per shard: each finished shard is written to disk, so a killed run resumes there.
    None: the engine's choice (vLLM on a GPU: four full batches), else DEFAULT_SHARD_SIZE."""
    cache: bool = True
    """Reuse generations across runs (keyed by model weights, prompt, grammar and every option
    that changes outputs) from $TOOLSWEEP_CACHE/generations."""

    loads_model = True
    needs_weights = True

    def constraint_problems(self, prefix: str, decoding: "DecodingConfig", answers: str) -> list[str]:
        if answers != GRAMMAR_ANSWER or decoding.constraint in ("none", *GRAMMAR_CONSTRAINTS):
            return []
        return [f"{prefix}decoding.constraint={decoding.constraint} cannot apply the benchmark's answer grammar (a Lark "
                f"grammar; vLLM's outlines backend takes none): set {prefix}decoding.constraint to one of "
                f"{list(GRAMMAR_CONSTRAINTS)}, or none"]

    def problems(self) -> list[str]:
        """Every invalid value of this engine's options."""
        if self.shard_size is None or self.shard_size >= 1:
            return []
        return [f"engine.shard_size must be an integer >= 1 (or null: the engine's choice), got {self.shard_size}"]


@dataclass
class VLLMEngineConfig(GeneratingEngineConfig):
    name: str = "vllm"
    target: str = "inference.engines.vllm_offline:VLLMEngine"
    enforce_eager: Optional[bool] = None
    """Skip graph capture/compilation. None: True on CPU (init 15-35 s, not 90-120 s), compiled on GPU."""
    gpu_memory_utilization: float = 0.9
    """Share of the GPU's total memory for this engine's weights and KV cache (at start vLLM
    refuses when less than that is free: engines sharing a GPU each take a part)."""
    max_num_seqs: Optional[int] = None
    """Sequences decoded together. None: vLLM's default for the device (256 on a CPU and on most
    GPUs, 1024 offline on H100/H200-class ones)."""
    max_num_batched_tokens: Optional[int] = None
    """Tokens per scheduler step (prefill chunk budget). None: vLLM's default."""
    cpu_kvcache_gib: float = 2.0
    """On CPU: KV-cache size in GiB, fractions allowed (VLLM_CPU_KVCACHE_SPACE, when set,
    takes precedence in whole GiB)."""
    kv_cache_dtype: str = field(default="auto", metadata=OUTPUT)
    """KV-cache dtype (auto: the model's; fp8, fp8_e4m3, fp8_e5m2 halve its memory)."""
    enable_prefix_caching: Optional[bool] = field(default=None, metadata=OUTPUT)
    """Reuse the KV of prompt prefixes seen before (None: vLLM's default, on). Off makes each
    request's numerics independent of what ran before it in the process: a resumed multi-turn run
    is then bit-identical to an uninterrupted one (on, at bf16, a reused prefix can flip a greedy
    token of a small model)."""

    serves_lora = True
    runs_quantized = True

    def problems(self) -> list[str]:
        found = super().problems()
        if self.max_num_seqs is not None and self.max_num_seqs < 1:
            found.append(f"engine.max_num_seqs must be an integer >= 1, got {self.max_num_seqs}")
        if not 0 < self.gpu_memory_utilization <= 1:
            found.append(f"engine.gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.cpu_kvcache_gib <= 0:
            found.append(f"engine.cpu_kvcache_gib must be > 0 (GiB, e.g. 0.5 or 2), got {self.cpu_kvcache_gib}")
        return found


@dataclass
class TransformersEngineConfig(GeneratingEngineConfig):
    name: str = "transformers"
    target: str = "inference.engines.hf_transformers:TransformersEngine"

    def constraint_problems(self, prefix: str, decoding: "DecodingConfig", answers: str) -> list[str]:
        if answers != GRAMMAR_ANSWER or decoding.constraint == "none":
            return []
        return [f"{prefix}engine=transformers applies a constraint as a regex, and the benchmark's answer grammar is "
                f"not one: set {prefix}decoding.constraint=none, or use engine=vllm with xgrammar or guidance"]


@dataclass
class ReplayEngineConfig(EngineConfig):
    name: str = "replay"
    target: str = "inference.engines.replay:ReplayEngine"
    predictions: str = MISSING
    """JSONL or Parquet file of {sample_id, output} rows."""

    answers = "samples"

    def problems(self) -> list[str]:
        found = super().problems()
        if not Path(self.predictions).expanduser().is_file():
            found.append(f"engine.predictions {self.predictions!r} is not a file (JSONL or Parquet of "
                         "{sample_id, output} rows)")
        return found


@dataclass
class PromptConfig:
    format: Optional[str] = None
    """benchmark: the benchmark's answer format ({"tool_name", "parameters"}); native: the tools go
    to the chat template and the model answers in its family's tool-call format, read by vLLM's
    parser. None: what the benchmark's authors used (`Benchmark.prompt_format`)."""


@dataclass
class DecodingConfig:
    constraint: str = field(default="outlines", metadata=OUTPUT)
    """Grammar for the answer: outlines | xgrammar | guidance | none (free decoding)."""
    max_new_tokens: int = field(default=256, metadata=OUTPUT)
    """Answer budget, as in the paper."""
    temperature: float = field(default=0.0, metadata=OUTPUT)
    """0 = greedy, as the paper's scoring assumes."""
    seed: int = field(default=0, metadata=OUTPUT)
    """Sampling seed (decoding is greedy by default, so it matters only with temperature > 0).
    Sample i > 0 of `samples` draws its own seed from (seed, i): inference.engines.request_seed."""
    samples: int = 1
    """Generations per prompt (for an agent benchmark, episodes per case), each its own row (`sample_index`
    0..k-1, sample_id `{id}#{i}` when k > 1): grading adds each metric's between-sample standard
    deviation, pass@k and pass^k. k > 1 needs temperature > 0 with a model engine. Not part of
    the cache key: sample i is the same generation whatever k is, so raising k reuses them."""
    compile_timeout_s: int = 60
    """Seconds one grammar may take to compile before its sample fails (vLLM's default, 5 s,
    fails real benchmark schemas under outlines: they take 0.2-6 s on a 49k vocabulary)."""
    max_string_chars: Optional[int] = None
    """xgrammar and guidance: cap every string value of the call at this many characters (default
    128), so a model looping inside a string still closes the call within max_new_tokens.
    Not under outlines: a cap grows its automaton past what compiles in time."""
    drop_oldest_history: bool = False
    """A prompt too long for the context: drop its oldest history items (True; only for a benchmark
    that declares how its prompts shorten, `Benchmark.shorten`) or record a too_long row."""


@dataclass
class RoleConfig:
    """A model a benchmark uses besides the evaluated one (its `Benchmark.roles`, e.g. a
    judge), configured the way the evaluated model is: `roles.<name>.model.path=...`,
    `engine@roles.<name>.engine=openai roles.<name>.engine.base_url=...`."""

    model: ModelConfig = field(default_factory=ModelConfig)
    engine: Any = MISSING
    """Any engine (conf/engine/*.yaml), typed by its target like the root `engine`."""
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    enabled: bool = True
    """False: the solvers of this role do not run (their columns stay empty); a later
    `toolsweep judge RUN_DIR` runs them on the stored outputs of the others."""


@dataclass
class TensorBoardExport:
    """Where `export.to=[tensorboard]` writes (as `toolsweep export --to tensorboard`)."""

    dir: Optional[str] = None
    """Log dir (default: the sweep dir's tensorboard/); your training run's log dir puts the points beside it."""


@dataclass
class WandbExport:
    """Where `export.to=[wandb]` writes: offline runs, for `wandb sync` later."""

    dir: Optional[str] = None
    """W&B dir (default: the sweep dir's wandb/)."""
    project: str = "toolsweep"
    """W&B project."""
    run_id: Optional[str] = None
    """Your existing (training) run: the points go into a folder for `wandb sync --append`."""


@dataclass
class MlflowExport:
    """Where `export.to=[mlflow]` writes."""

    tracking_uri: Optional[str] = None
    """MLflow tracking URI (default: sqlite:///SWEEP_DIR/mlflow.db)."""
    project: str = "toolsweep"
    """MLflow experiment."""
    run_id: Optional[str] = None
    """Your existing (training) run to add the points to."""


@dataclass
class TrackioExport:
    """Where `export.to=[trackio]` writes: Trackio's local store."""

    dir: Optional[str] = None
    """Trackio dir (default: the sweep dir's trackio/)."""
    project: str = "toolsweep"
    """Trackio project (an existing one keeps its runs)."""


@dataclass
class ExportConfig:
    """Trackers a sweep's metrics go into when it ends (`toolsweep -m ... export.to=[tensorboard,mlflow]`),
    as `toolsweep export SWEEP --to TRACKER` writes them; each tracker's destination under its name."""

    to: list[str] = field(default_factory=list)
    """Trackers (tensorboard, wandb, mlflow, trackio), exported in this order when the sweep ends; their
    libraries are checked before the first job starts. A single run: `toolsweep export RUN_DIR`."""
    tensorboard: TensorBoardExport = field(default_factory=TensorBoardExport)
    """Where TensorBoard's event files go."""
    wandb: WandbExport = field(default_factory=WandbExport)
    """Where W&B's offline runs go."""
    mlflow: MlflowExport = field(default_factory=MlflowExport)
    """Where MLflow's runs go."""
    trackio: TrackioExport = field(default_factory=TrackioExport)
    """Where Trackio's runs go."""

    def destinations(self) -> dict[str, dict[str, Any]]:
        """Each tracker of `to` with the options `grading.trackers.export` takes."""
        found = {}
        for name in self.to:
            options = dict(vars(getattr(self, name)))
            if "dir" in options:
                options["destination"] = Path(options.pop("dir")).expanduser() if options["dir"] else None
            found[name] = options
        return found


@dataclass
class ToolsweepConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    dataset: Any = MISSING
    """The benchmark's options: a `DatasetConfig` subclass (conf/dataset/*.yaml picks the benchmark)."""
    engine: Any = MISSING
    """The evaluated model's engine (conf/engine/*.yaml picks it), typed by its target."""
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    roles: dict[str, RoleConfig] = field(default_factory=dict)
    """The other models the benchmark uses, by role name (its YAML adds them)."""
    data_root: Optional[str] = None
    """The folder each benchmark's YAML finds its data under (one folder per benchmark, as its YAML says;
    inference/dataroot.py); TOOLSWEEP_DATA_ROOT where not set; a dataset's own path wins."""
    quiet: bool = False
    """Hide the progress bars (logs still go to run.log)."""
    verbose: bool = False
    """Show vLLM's, torch's and transformers' log lines on the console too (they always go to run.log)."""
    max_error_rate: float = 0.1
    """The run fails (outputs still written) when more than this share of samples errored:
    too_long prompts, engine or grammar errors, empty outputs."""
    export: ExportConfig = field(default_factory=ExportConfig)
    """Trackers a sweep's metrics go into when it ends."""


def register_configs() -> None:
    """Register the root schema conf/config.yaml extends (the parts chosen by name are typed
    after composition, by `typed_config`)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="toolsweep_schema", node=ToolsweepConfig)


def validate(cfg: ToolsweepConfig, benchmark: Any) -> None:
    """Raise one ConfigError listing every invalid value (the model is not loaded yet).

    `benchmark` is the chosen `inference.benchmarks.base.Benchmark` (its settings, path hint,
    roles and the engine kinds its solvers use)."""
    problems = [*value_problems(cfg, benchmark), *_check_engine(cfg, benchmark), *_check_numbers(cfg),
                *_check_paths(cfg, benchmark), *_check_roles(cfg, benchmark), *_check_constraints(cfg, benchmark),
                *_check_shortening(cfg, benchmark)]
    if benchmark.check is not None and Path(cfg.dataset.path).expanduser().exists():
        problems += benchmark.check(cfg)
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))


def value_problems(cfg: ToolsweepConfig, benchmark: Any) -> list[str]:
    """The values a run refuses whatever is on disk and whichever engine runs: a choice it does not
    accept (a constraint, a prompt format, a setting of the benchmark) and the benchmark's own options
    (`DatasetConfig.problems`). Part of `validate`; the docs check (tests/docs_check.py) applies it
    to every config the docs show, so a page cannot show a value a run refuses."""
    return [*_check_choices(cfg, benchmark), *cfg.dataset.problems(), *export_problems(cfg.export.to)]


def export_problems(trackers: list[str]) -> list[str]:
    """export.to names trackers `toolsweep export` writes to, each once."""
    from grading.trackers import WRITERS

    bad = [name for name in trackers if name not in WRITERS]
    if bad:
        return [f"export.to must be a subset of {list(WRITERS)}, got {list(trackers)} ({bad} unknown)"]
    if len(set(trackers)) != len(trackers):
        return [f"export.to lists a tracker twice: {list(trackers)}"]
    return []


def _check_shortening(cfg: ToolsweepConfig, benchmark: Any) -> list[str]:
    """decoding.drop_oldest_history needs a benchmark that says how its prompts shorten."""
    if cfg.decoding.drop_oldest_history and getattr(benchmark, "shorten", None) is None:
        return [f"decoding.drop_oldest_history=true: {benchmark.name}'s prompts hold no history list to shorten "
                "(its benchmark declares no `shorten`); a prompt that does not fit its context fails as too_long "
                "whatever this says: drop the option"]
    return []


def _check_choices(cfg: ToolsweepConfig, benchmark: Any) -> list[str]:
    problems = []
    choices = [("decoding.constraint", cfg.decoding.constraint, CONSTRAINTS),
               ("prompt.format", cfg.prompt.format, (*PROMPT_FORMATS, None)),
               *((f"roles.{name}.decoding.constraint", role.decoding.constraint, CONSTRAINTS)
                 for name, role in cfg.roles.items())]
    for key, value, allowed in choices:
        if value not in allowed:
            problems.append(f"{key} must be one of {list(allowed)}, got {value!r}")
    known = list(benchmark.settings)
    bad = [s for s in cfg.dataset.settings if s not in known]
    if bad or not cfg.dataset.settings:
        problems.append(f"dataset.settings must be a non-empty subset of {known} for "
                        f"{cfg.dataset.name}, got {list(cfg.dataset.settings)}")
    elif len(set(cfg.dataset.settings)) != len(cfg.dataset.settings):
        problems.append(f"dataset.settings lists a setting twice: {list(cfg.dataset.settings)}")
    return problems


def _check_engine(cfg: ToolsweepConfig, benchmark: Any) -> list[str]:
    problems = []
    if cfg.engine.answers not in benchmark.engine_answers:
        problems.append(f"engine={cfg.engine.name} answers {cfg.engine.answers}, which benchmark {cfg.dataset.name} "
                        f"cannot use (its solvers take engines that answer {list(benchmark.engine_answers)}): "
                        f"{_ENGINE_HINTS.get(cfg.engine.answers, '')}")
    return problems


_ENGINE_HINTS = {"turns": "engine=script drives a multi-turn agent; score stored single answers with "
                          "engine=replay engine.predictions=FILE, or generate with engine=vllm",
                 "samples": "engine=replay grades one stored answer per sample; a multi-turn benchmark needs a "
                            "model engine (vllm, transformers, openai, chat) or engine=script",
                 "prompts": "choose a replay or script engine"}


def _number_problems(prefix: str, decoding: DecodingConfig, model: ModelConfig) -> list[str]:
    checks = ((f"{prefix}decoding.max_new_tokens", decoding.max_new_tokens, 1, False),
              (f"{prefix}model.tensor_parallel_size", model.tensor_parallel_size, 1, False),
              (f"{prefix}model.max_model_len", model.max_model_len, 2, True),
              (f"{prefix}decoding.compile_timeout_s", decoding.compile_timeout_s, 1, False),
              (f"{prefix}decoding.max_string_chars", decoding.max_string_chars, 1, True))
    problems = [f"{key} must be an integer >= {low}{' or null' if nullable else ''}, got {value!r}"
                for key, value, low, nullable in checks
                if not (value is None and nullable) and (value is None or value < low)]
    if decoding.max_string_chars is not None and decoding.constraint in ("outlines", "none"):
        problems.append(f"{prefix}decoding.max_string_chars={decoding.max_string_chars} needs "
                        f"{prefix}decoding.constraint=xgrammar or guidance, got {decoding.constraint!r}: under "
                        "outlines a string cap grows the automaton past what compiles in time (a 32-character "
                        "cap on one benchmark's schema overflowed vLLM's grammar cache); drop the cap or switch "
                        "the constraint")
    if decoding.temperature < 0:
        problems.append(f"{prefix}decoding.temperature must be >= 0, got {decoding.temperature}")
    if decoding.samples < 1:
        problems.append(f"{prefix}decoding.samples must be an integer >= 1, got {decoding.samples}")
    return problems


def _sample_problems(cfg: ToolsweepConfig) -> list[str]:
    """decoding.samples repeats the evaluated model only, and only where repeats can differ."""
    problems = [f"roles.{name}.decoding.samples={role.decoding.samples}: only the evaluated model is sampled "
                f"repeatedly (decoding.samples); a {name} answers once for each of those samples, so set "
                f"roles.{name}.decoding.samples=1" for name, role in cfg.roles.items() if role.decoding.samples != 1]
    if cfg.decoding.samples > 1 and cfg.decoding.temperature == 0 and cfg.engine.loads_model:
        problems.append(f"decoding.samples={cfg.decoding.samples} with decoding.temperature=0 asks for "
                        f"{cfg.decoding.samples} copies of one greedy answer; set decoding.temperature > 0 "
                        "(e.g. 0.7) to sample, or decoding.samples=1")
    return problems


def _check_numbers(cfg: ToolsweepConfig) -> list[str]:
    problems = _number_problems("", cfg.decoding, cfg.model)
    problems += cfg.dataset.shard_problems()
    if cfg.dataset.limit is not None and cfg.dataset.limit < 1:
        problems.append(f"dataset.limit must be an integer >= 1 or null, got {cfg.dataset.limit!r}")
    if not 0 <= cfg.max_error_rate <= 1:
        problems.append(f"max_error_rate must be in [0, 1], got {cfg.max_error_rate}")
    return problems + _sample_problems(cfg) + cfg.engine.problems()


def _check_paths(cfg: ToolsweepConfig, benchmark: Any) -> list[str]:
    problems = []
    if not Path(cfg.dataset.path).expanduser().exists():
        problems.append(f"dataset.path {cfg.dataset.path!r} does not exist; point dataset.path at "
                        f"{benchmark.path_hint}")
    if cfg.engine.renders_locally:
        try:
            check_model_dir(cfg.model.path, weights=cfg.engine.needs_weights)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems + _check_lora(cfg) + _check_quantization(cfg)


def _check_roles(cfg: ToolsweepConfig, benchmark: Any) -> list[str]:
    declared = tuple(benchmark.roles)
    problems = [f"roles.{name} is not a role of benchmark {cfg.dataset.name} (its roles: {list(declared)}); "
                "remove it" for name in cfg.roles if name not in declared]
    problems += [f"benchmark {cfg.dataset.name} needs a model for its role {name!r}: its conf/dataset YAML "
                 f"defines roles.{name}; set roles.{name}.model.path=... " for name in declared if name not in cfg.roles]
    for name, role in cfg.roles.items():
        if name not in declared or not role.enabled:
            continue
        prefix = f"roles.{name}."
        problems += _number_problems(prefix, role.decoding, role.model)
        problems += [f"{prefix}{p}" for p in role.engine.problems()]
        if role.engine.answers not in benchmark.engine_answers:
            problems.append(f"{prefix}engine={role.engine.name} answers {role.engine.answers}, which benchmark "
                            f"{cfg.dataset.name} cannot use (it takes engines that answer "
                            f"{list(benchmark.engine_answers)})")
        elif role.engine.renders_locally:
            try:
                check_model_dir(role.model.path, weights=role.engine.needs_weights)
            except ConfigError as exc:
                problems.append(f"{prefix}model: {exc}")
    return problems


def _check_constraints(cfg: ToolsweepConfig, benchmark: Any) -> list[str]:
    """Constraints an engine cannot apply to what its role answers (a chat server's)."""
    found = cfg.engine.constraint_problems("", cfg.decoding, _model_answers(cfg, benchmark))
    for name, role in cfg.roles.items():
        if name in benchmark.roles and role.enabled:  # another role's answer is one JSON object (a judge's)
            found += role.engine.constraint_problems(f"roles.{name}.", role.decoding, JSON_ANSWER)
    return found


def _model_answers(cfg: ToolsweepConfig, benchmark: Any) -> str:
    native = (cfg.prompt.format or benchmark.prompt_format) == NATIVE_FORMAT
    if not native and getattr(benchmark, "answer_grammar", False):
        return GRAMMAR_ANSWER  # every step of its multi-turn loops too
    # a benchmark whose solvers take scripted turns (engine=script) runs an agent loop
    if "turns" in benchmark.engine_answers:
        return AGENT_TURN
    if native:
        # calls or plain text, as an agent's turn is, where the benchmark lets the answer hold no call
        return AGENT_TURN if getattr(benchmark, "calls_optional", False) else CALLS_ANSWER
    return GRAMMAR_ANSWER if getattr(benchmark, "answer_grammar", False) else JSON_ANSWER


def _check_lora(cfg: ToolsweepConfig) -> list[str]:
    if cfg.model.lora is None:
        return []
    if not cfg.engine.serves_lora:
        return [f"model.lora needs engine=vllm (vLLM serves adapters); got engine={cfg.engine.name}"]
    if not (Path(cfg.model.lora).expanduser() / "adapter_config.json").is_file():
        return [f"model.lora {cfg.model.lora!r} is not a LoRA adapter folder: it has no "
                "adapter_config.json"]
    return []


def _check_quantization(cfg: ToolsweepConfig) -> list[str]:
    roles = [("model.", cfg.model, cfg.engine), *((f"roles.{name}.model.", role.model, role.engine)
                                                  for name, role in cfg.roles.items())]
    return [f"{prefix}quantization/load_format need an engine that loads the weights with vLLM (engine=vllm); "
            f"got engine={engine.name} (a server's quantization is set where it is served)"
            for prefix, model, engine in roles
            if (model.quantization is not None or model.load_format != "auto") and not engine.runs_quantized]


def typed_config(data: dict[str, Any], dataset_options: type) -> ToolsweepConfig:
    """A resolved config (as `OmegaConf.to_container` wrote it, e.g. into a run dir) as typed
    dataclasses: the dataset by `dataset_options` (the chosen benchmark's options class), each
    engine by its target's options. An unknown key or a wrong type is a ConfigError naming it."""
    # the parts typed by their own schemas are filled in below
    rest = {**data, "dataset": None, "engine": None, "roles": {}}
    cfg = _structured(ToolsweepConfig, rest, "")
    cfg.dataset = _structured(dataset_options, data.get("dataset") or {}, "dataset.")
    cfg.engine = typed_engine(data.get("engine") or {}, "engine.")
    cfg.roles = {name: _typed_role(name, role or {}) for name, role in (data.get("roles") or {}).items()}
    return cfg


def _typed_role(name: str, data: dict[str, Any]) -> RoleConfig:
    prefix = f"roles.{name}."
    role = _structured(RoleConfig, {**data, "engine": None}, prefix)
    role.engine = typed_engine(data.get("engine") or {}, f"{prefix}engine.")
    return role


def typed_engine(data: dict[str, Any], prefix: str = "engine.") -> EngineConfig:
    """An engine's options typed by the `CONFIG` of the module its `target` names."""
    import importlib

    target = data.get("target")
    if not isinstance(target, str) or ":" not in target:
        raise ConfigError(f"{prefix}target must name an engine class as module:Class, got {target!r}: choose an "
                          "engine from conf/engine/ (engine=vllm, or engine@roles.NAME.engine=vllm for a role)")
    module = target.partition(":")[0]
    try:
        schema = importlib.import_module(module).CONFIG
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{prefix}target {target!r}: module {module} defines no engine CONFIG ({exc})") from None
    return _structured(schema, data, prefix)


def _structured(schema: type, data: dict[str, Any], prefix: str) -> Any:
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), data))
    except ConfigKeyError as exc:
        key = getattr(exc, "full_key", None) or getattr(exc, "key", None) or str(exc).splitlines()[0]
        known = [f.name for f in fields(schema)]
        raise ConfigError(f"{prefix}{key} is not an option here ({schema.__name__} has {known}); "
                          "remove it or check its spelling") from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: {str(exc).splitlines()[0]}") from None
