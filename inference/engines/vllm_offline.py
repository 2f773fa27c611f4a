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
from inference.config import VLLMEngineConfig


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


class VLLMEngine:
    """Offline `vllm.LLM` over a local model folder."""

    def __init__(self, *, model_path: str, constraint: str, max_model_len: int, dtype: str,
                 lora: str | None, max_lora_rank: int,
                 tensor_parallel_size: int, max_new_tokens: int, temperature: float, seed: int,
                 enforce_eager: bool | None, gpu_memory_utilization: float, max_num_seqs: int,
                 max_num_batched_tokens: int | None,
                 cpu_kvcache_gib: float, compile_timeout_s: int, enable_prefix_caching: bool | None = None) -> None:
        on_cpu = configure_environment(compile_timeout_s)
        try:
            from vllm import LLM
        except ImportError as exc:
            raise EngineError(f"engine=vllm needs vllm ({exc}); run `make install`, or use "
                              "engine=transformers") from exc
        self.constraint = constraint
        self.backend = constraint
        self._max_new_tokens, self._temperature, self._seed = max_new_tokens, temperature, seed
        options: dict[str, Any] = {}
        if max_num_batched_tokens:
            options["max_num_batched_tokens"] = max_num_batched_tokens
        if enable_prefix_caching is not None:
            options["enable_prefix_caching"] = enable_prefix_caching
        if on_cpu and temperature > 0:
            # Every sampled request carries its own seed (request_seed). vLLM's CPU runner fails a
            # seeded request whose prompt is prefilled in chunks ("CPU Generator does not use
            # offset": it rewinds the generator of a chunk's discarded token, which only a CUDA
            # generator can), so prompts are prefilled whole, one step holding a full context.
            options["enable_chunked_prefill"] = False
            options["max_num_batched_tokens"] = max(max_num_batched_tokens or 0, max_model_len or 0, 8192)
        if on_cpu and not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
            # In bytes rather than VLLM_CPU_KVCACHE_SPACE's whole GiB: the cache is zero-filled
            # at start-up (about 1.5 s a GiB here), which a small model should not pay for 2 GiB.
            options["kv_cache_memory_bytes"] = int(cpu_kvcache_gib * 2**30)
        self._lora = None
        if lora:
            from vllm.lora.request import LoRARequest

            options.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=1)
            self._lora = LoRARequest(os.path.basename(os.path.normpath(lora)), 1, lora)
        if constraint != "none":
            options["structured_outputs_config"] = {
                "backend": constraint,
                # only xgrammar and guidance accept it; outlines gets a compact regex instead
                **({"disable_any_whitespace": True} if constraint in ("xgrammar", "guidance") else {}),
            }
        try:
            self.llm = LLM(model=model_path, tokenizer=model_path, dtype=dtype,
                           max_model_len=max_model_len, tensor_parallel_size=tensor_parallel_size,
                           enforce_eager=on_cpu if enforce_eager is None else enforce_eager,
                           gpu_memory_utilization=gpu_memory_utilization, max_num_seqs=max_num_seqs,
                           seed=seed, use_tqdm_on_load=False, **options)
        except Exception as exc:  # noqa: BLE001 - vLLM raises many types while starting
            raise EngineError(f"vLLM could not load model.path={model_path!r}: "
                              f"{type(exc).__name__}: {exc}") from exc

    @classmethod
    def from_config(cls, engine: Any, context: EngineContext) -> "VLLMEngine":
        model, decoding = context.model, context.decoding
        return cls(model_path=model.path, constraint=decoding.constraint, max_model_len=context.max_model_len,
                   dtype=model.dtype, lora=model.lora, max_lora_rank=model.max_lora_rank,
                   tensor_parallel_size=model.tensor_parallel_size, max_new_tokens=decoding.max_new_tokens,
                   temperature=decoding.temperature, seed=decoding.seed, enforce_eager=engine.enforce_eager,
                   gpu_memory_utilization=engine.gpu_memory_utilization, max_num_seqs=engine.max_num_seqs,
                   max_num_batched_tokens=engine.max_num_batched_tokens, cpu_kvcache_gib=engine.cpu_kvcache_gib,
                   compile_timeout_s=decoding.compile_timeout_s, enable_prefix_caching=engine.enable_prefix_caching)

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
