"""`python -m tests.inference.swap_probe OUT.json STEP [STEP ...]`: one vLLM engine (toolsweep's
VLLMEngine, as a run builds it) loaded on the first step's checkpoint, then each further step's
checkpoint read into it in place (VLLMEngine.swap), the prompts probed after each: greedy tokens and
logprobs, and prompt logprobs. A step is `PATH` or `PATH:skip-refresh` / `PATH:skip-reset` (the
swap without that part, to show that the comparison sees it). Writes one record per step, with
the layers the swap's refresh packed again (`refreshed`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

# Each prompt spans whole KV blocks, so that the prefix cache holds them between probes.
_TEXT = ("The committee reviews the budget for the new library, which will include a reading room, a garden "
         "and a small cafe open on weekends. ")
PROMPTS = [_TEXT * 12 + "Summarise the plan:", "Plan a trip to the sea with three stops. " * 24 + "Stops:"]


def _dtype() -> str:
    """bf16 where the CPU computes it (its packed lm_head copy is what a swap must refresh); on a CPU
    that only emulates bf16 (AVX2) nothing is packed for it, and float32 runs the same swap at a
    third of the time."""
    from inference.hardware import cpu_info

    return "bfloat16" if cpu_info()["native_bf16"] else "float32"


DTYPE = _dtype()


def probe(llm) -> dict:
    from vllm import SamplingParams

    def run(prompt_logprobs):
        params = SamplingParams(temperature=0.0, max_tokens=8, logprobs=1, ignore_eos=True,
                                prompt_logprobs=prompt_logprobs)
        found = []
        for output in llm.generate(PROMPTS, params, use_tqdm=False):
            completion = output.outputs[0]
            record = {"tokens": list(completion.token_ids),
                      "logprobs": [step[token].logprob for token, step in zip(completion.token_ids, completion.logprobs)],
                      "cached": output.num_cached_tokens}
            if output.prompt_logprobs is not None:
                record["prompt_logprobs"] = [None if step is None else step[token].logprob
                                             for token, step in zip(output.prompt_token_ids, output.prompt_logprobs)]
            found.append(record)
        return found

    # the first computes every prompt and fills the prefix cache; the second reads what it filled
    return {"computed": run(1), "from_cache": run(None)}


def main(out: str, steps: list[str]) -> None:
    from inference.config import DecodingConfig, ModelConfig, VLLMEngineConfig
    from inference.engines import EngineContext
    from inference.engines.vllm_offline import VLLMEngine

    def context(path: str) -> EngineContext:
        return EngineContext(model=ModelConfig(path=path, dtype=DTYPE),
                             decoding=DecodingConfig(constraint="none", max_new_tokens=8),
                             max_model_len=1024, sample_ids=[])

    engine_cfg = VLLMEngineConfig(cpu_kvcache_gib=0.0625)
    records = []
    engine = None
    for step in steps:
        path, _, skip = step.partition(":")
        if engine is None:
            engine = VLLMEngine(engine_cfg, context(path))
        else:
            llm, applied = engine.llm, []
            real_apply = llm.apply_model
            # what the refresh packed again (the layers that compute from a packed copy of their own)
            llm.apply_model = lambda function: applied.append(real_apply(function)) or applied[-1]
            if skip == "skip-refresh":
                llm.apply_model = lambda function: []
            elif skip == "skip-reset":
                llm.reset_prefix_cache = lambda: True
            engine.swap(context(path))
            for name in ("apply_model", "reset_prefix_cache"):
                llm.__dict__.pop(name, None)
            records.append({"step": step, "refreshed": sorted({layer for found in applied for worker in found
                                                               for layer in worker}), **probe(engine.llm)})
            continue
        records.append({"step": step, "refreshed": [], **probe(engine.llm)})
    Path(out).write_text(json.dumps(records))


if __name__ == "__main__":
    import torch

    # vLLM's sampler counts each logprob's rank with a torch.compile'd function: eagerly it counts
    # the same, without a C++ compile by inductor in each probe process (about 10 s here)
    with torch.compiler.set_stance("force_eager"):
        main(sys.argv[1], sys.argv[2:])
