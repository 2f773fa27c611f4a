"""model.dtype=auto on a CPU: float32 without native bf16, bfloat16 with it; GPUs keep vLLM's auto."""

from __future__ import annotations

import pytest

from inference.hardware import cpu_info, resolve_dtype

AVX2_ONLY = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse2 avx avx2 fma\n"
ZEN4 = "processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t\t: avx2 avx512f avx512_bf16\n"
SAPPHIRE = "model name\t: Intel Xeon\nflags\t: avx2 avx512f amx_bf16 amx_tile\n"
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd sve bf16\n"


@pytest.mark.parametrize("text,native,flags", [
    (AVX2_ONLY, False, ["avx2"]), (ZEN4, True, ["avx2", "avx512_bf16", "avx512f"]),
    (SAPPHIRE, True, ["amx_bf16", "amx_tile", "avx2", "avx512f"]), (GRAVITON3, True, ["asimd", "bf16", "sve"]),
], ids=["avx2_only", "avx512_bf16", "amx", "arm_bf16"])
def test_cpu_info_reads_the_flags(tmp_path, text, native, flags):
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    info = cpu_info(path)
    assert (info["native_bf16"], info["flags"]) == (native, flags)


def test_resolution():
    slow = {"model": "x", "flags": ["avx2"], "native_bf16": False}
    fast = {"model": "x", "flags": ["avx512_bf16"], "native_bf16": True}
    assert resolve_dtype("auto", False, slow)[0] == "float32"
    assert resolve_dtype("auto", False, fast) == ("bfloat16", "CPU with native bf16 (avx512_bf16)")
    assert resolve_dtype("auto", True, slow)[0] == "auto", "GPUs: the model's own dtype"
    assert resolve_dtype("bfloat16", False, slow) == ("bfloat16", "set by model.dtype")
    # vLLM refuses fp8_per_channel on float32 weights: on a CPU without native bf16, auto takes bf16 for it
    assert resolve_dtype("auto", False, slow, "fp8_per_channel")[0] == "bfloat16"
    assert resolve_dtype("auto", False, fast, "fp8_per_channel")[0] == "bfloat16"
    assert resolve_dtype("auto", False, slow, "awq")[0] == "float32"


def test_unreadable_cpuinfo_means_no_native_bf16(tmp_path):
    assert cpu_info(tmp_path / "missing")["native_bf16"] is False
