"""Shared fixtures: the real PEToolBench file when present, the embedded model, scratch dirs."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import pytest

from tests.warm import WARM

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "datasets" / "sample" / "user_entries_sample.json"
SHARED_DATA = REPO.parent / "shared" / "data"
PETOOLBENCH = SHARED_DATA / "petoolbench" / "user_entries_test.json"
FAMILYTOOL_SAMPLE = REPO / "datasets" / "familytool_sample"
TOOLSPECTRUM_SAMPLE = REPO / "datasets" / "toolspectrum_sample"


def share_gpu() -> dict[str, str]:
    """On a GPU node every pytest worker starts engines on the same GPU: each engine gets its part
    of the free memory and runs eager (conf/engine/vllm.yaml reads these from the environment, so
    every engine a test starts, a child process's and a judge's included, takes its part)."""
    from inference.gpu import probe, shared_engine_settings

    settings = shared_engine_settings(probe(), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    os.environ.update(settings)
    return settings


GPU_SHARE = share_gpu()


@pytest.fixture(scope="session")
def petoolbench_file() -> Path:
    """The real PEToolBench test file; tests that need it skip, saying so, where it is absent."""
    if not PETOOLBENCH.is_file():
        pytest.skip(f"PEToolBench data absent: {PETOOLBENCH} not found (it lives in ../shared/data)")
    return PETOOLBENCH


def _shared(name: str) -> Path:
    folder = SHARED_DATA / name
    if not (folder / "SOURCE.md").is_file():
        pytest.skip(f"{name} data absent: {folder} not found (it lives in ../shared/data)")
    return folder


@pytest.fixture(scope="session")
def familytool_dir() -> Path:
    """The real FamilyTool folder; tests that need it skip, saying so, where it is absent."""
    return _shared("familytool")


@pytest.fixture(scope="session")
def toolspectrum_dir() -> Path:
    """The real ToolSpectrum folder; tests that need it skip, saying so, where it is absent."""
    return _shared("toolspectrum")


@pytest.fixture(scope="session")
def acebench_dir() -> Path:
    """The real ACEBench data folder (data_all/data_en/...); skipped, saying so, where absent."""
    return _shared("acebench")


@pytest.fixture(scope="session")
def etapp_data() -> Path:
    """The real ETAPP folder (TravelPlanner's tables beside it); skipped, saying so, where absent."""
    _shared("travelplanner")
    return _shared("etapp")


@pytest.fixture(scope="session")
def bfcl_data() -> Path:
    """The real BFCL data folder (question files and possible_answer/); skipped, saying so, where absent."""
    return _shared("bfcl") / "data"


@pytest.fixture(scope="session")
def bfcl_eval_copy() -> str:
    """BFCL's code as a user has it: $TOOLSWEEP_BFCL_EVAL, else the bfcl_eval wheel `make install`
    downloads (without its dependencies, never installed) to <venv>/share/toolsweep/."""
    found = os.environ.get("TOOLSWEEP_BFCL_EVAL") or next(
        (str(p) for p in sorted((Path(sys.prefix) / "share" / "toolsweep").glob("bfcl_eval-*.whl"))), None)
    if found is None:
        message = "no copy of BFCL's code: `make install` downloads its wheel, or set TOOLSWEEP_BFCL_EVAL"
        if os.environ.get("TOOLSWEEP_REQUIRE_UPSTREAM"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="session")
def embedded_model() -> Path:
    """The embedded SmolLM2 folder, converted from the packaged GGUF if needed (never skipped)."""
    from inference.models import prepare_embedded_model

    return prepare_embedded_model()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, embedded_model) -> Path:
    """A seeded random 2-layer Llama with the embedded model's tokenizer and chat template, built
    once per test run (a few seconds): the real engine runs it on real prompts in milliseconds a
    step, for tests whose subject is the pipeline, not the model's answers."""
    from inference.models import TINY_NAME, prepare_tiny_model

    return prepare_tiny_model(tmp_path_factory.mktemp("models") / TINY_NAME)


def tiny_args(model: Path | str, vllm: bool = True, max_new_tokens: int | None = 16) -> list[str]:
    """Overrides that run `model` (the tiny one; a sweep passes several folders joined by commas)
    with short answers (None: the benchmark's own budget) and, in-process (`vllm`), a small KV
    cache: its tokens are noise, so more of them prove nothing, and zero-filling 2 GiB of cache
    would cost more than its generations."""
    return ["model=local", f"model.path={model}",
            *([f"decoding.max_new_tokens={max_new_tokens}"] if max_new_tokens else []),
            *(["engine.cpu_kvcache_gib=0.0625"] if vllm else [])]


@pytest.fixture(scope="session")
def scratch_env(tmp_path_factory, embedded_model) -> dict[str, str]:
    """Environment for child processes: vLLM caches and temp files under pytest's tmp dir."""
    from inference.models import cache_root

    root = tmp_path_factory.mktemp("scratch")
    # A fresh toolsweep cache (no generations from earlier runs), sharing the converted models.
    (root / "cache").mkdir()
    (root / "cache" / "models").symlink_to(cache_root() / "models", target_is_directory=True)
    env = {**os.environ, "VLLM_CACHE_ROOT": str(_session_folder(tmp_path_factory) / "vllm"), "TMPDIR": str(root),
            "TOOLSWEEP_CACHE": str(root / "cache"), "VLLM_ENABLE_V1_MULTIPROCESSING": "0", **core_binding()}
    WARM.home(env)  # commands run with this environment go to a warm worker of this pytest process
    return env


def _session_folder(tmp_path_factory) -> Path:
    """A folder all of this session's pytest processes share (each xdist worker's base temp dir is
    one below it): vLLM's cache of what it found in a model class (VLLM_CACHE_ROOT holds nothing
    else here) is made once for the session, where each worker and each `vllm serve` made their own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def core_binding() -> dict[str, str]:
    """Under pytest-xdist each worker's engines get a core of their own: two engines whose OpenMP
    threads both spin on every core slow each other down far more than they gain."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return {}
    core = str(int(worker[2:]) % (os.cpu_count() or 1))
    return {"VLLM_CPU_OMP_THREADS_BIND": core, "OMP_NUM_THREADS": "1"}


def pytest_collection_modifyitems(config, items):
    """The tests that start an engine first in every worker's share (the same order on every
    xdist worker). pytest-xdist's worksteal hands each of the W workers a contiguous W-th of the
    collection and steals from the end of a worker's queue, so the long tests are dealt out
    round-robin to the front of each share: they start at once, everywhere, while the quick
    ones fill in and are the ones stolen, instead of one long test running alone at the end."""
    long = [item for item in items if item.get_closest_marker("vllm") or "tiny_model" in item.fixturenames]
    quick = [item for item in items if not (item.get_closest_marker("vllm") or "tiny_model" in item.fixturenames)]
    items[:] = dealt(long, quick, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


SHARED_SERVERS = ("vllm_server", "judge_server")
"""Module fixtures that start a server: every test using any of them goes to the same worker, so
each server starts once (a module-scoped fixture starts again in every worker that runs its tests)."""


def dealt(long: list, quick: list, workers: int) -> list:
    """`long` to the front of `workers` equal contiguous shares (the tests of one shared server
    together, each group to the share with the fewest long tests so far), `quick` filling them."""
    size = -(-(len(long) + len(quick)) // workers)
    groups: dict[str, list] = {}
    for item in long:
        shares_a_server = any(name in getattr(item, "fixturenames", ()) for name in SHARED_SERVERS)
        groups.setdefault("servers" if shares_a_server else item.nodeid, []).append(item)
    shares: list[list] = [[] for _ in range(workers)]
    for group in groups.values():
        min(shares, key=len).extend(group)
    rest = iter(quick)
    for share in shares:
        share.extend(itertools.islice(rest, max(size - len(share), 0)))
    return [item for share in shares for item in share] + list(rest)
