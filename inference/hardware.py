"""What the machine can do, for choices that depend on it: the weights' dtype on a CPU.

bf16 matrix work is fast only where the CPU has native bf16 instructions (x86: AVX512_BF16 or
AMX-BF16; ARM: the BF16 extension). Elsewhere it is emulated: on an AVX2-only AMD EPYC the same
9 prompts took 152.5 s of generation in bf16 against 67.7 s in float32 (2.25x).
"""

from __future__ import annotations

import platform
from pathlib import Path

# x86 flags in /proc/cpuinfo `flags`; ARM's in `Features`.
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
_REPORTED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "bf16", "asimd", "sve")


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, object]:
    """The CPU's model name and the flags that decide the dtype (empty where unreadable)."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        lines = cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and value.strip():
            name = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return {"model": name, "flags": sorted(f for f in _REPORTED_FLAGS if f in flags),
            "native_bf16": any(f in flags for f in NATIVE_BF16_FLAGS)}


# Quantization methods whose CPU kernels take only 16-bit activations: vLLM refuses them with
# float32 ("torch.float32 is not supported for quantization method fp8_per_channel").
HALF_ONLY_QUANTIZATIONS = ("fp8_per_channel",)


def resolve_dtype(requested: str, on_gpu: bool, cpu: dict[str, object] | None = None,
                  quantization: str | None = None) -> tuple[str, str]:
    """(dtype the engine gets, why). Only `auto` on a CPU is decided here."""
    if requested != "auto":
        return requested, "set by model.dtype"
    if on_gpu:
        return "auto", "GPU: the model's own dtype (vLLM's auto)"
    cpu = cpu if cpu is not None else cpu_info()
    if cpu["native_bf16"]:
        return "bfloat16", "CPU with native bf16 (" + ", ".join(f for f in cpu["flags"] if "bf16" in f) + ")"
    if quantization in HALF_ONLY_QUANTIZATIONS:
        return "bfloat16", (f"CPU without native bf16, but model.quantization={quantization} runs only on 16-bit "
                            "weights: bf16, emulated")
    return "float32", "CPU without native bf16: bf16 would be emulated (2.25x slower measured on AVX2)"
