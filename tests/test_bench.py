"""`make bench`'s warm section reads two sweep dirs; how it pairs jobs, compares their outputs and
times their first generation is checked here on made-up job dirs (no engine)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import polars as pl

from tests.conftest import REPO

BENCH = REPO / "scripts" / "bench.py"


def _bench():
    """scripts/bench.py (a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _job(sweep: Path, number: int, checkpoint: str, dataset: str, outputs: dict[str, str] | None) -> None:
    """A job dir as a sweep leaves it: job.json, and samples.parquet where it completed."""
    job_dir = sweep / str(number)
    job_dir.mkdir(parents=True)
    overrides = [f"model.path=/ckpts/{checkpoint}", f"dataset={dataset}"]
    status = "complete" if outputs is not None else "failed"
    (job_dir / "job.json").write_text(json.dumps({"status": status, "overrides": overrides, "wall_s": 5.0,
                                                  "reason": None if outputs else "exit 1"}))
    if outputs is not None:
        pl.DataFrame({"sample_id": list(outputs), "output": list(outputs.values())}).write_parquet(
            job_dir / "samples.parquet")


def test_outputs_are_compared_job_for_job_by_overrides_not_job_number(tmp_path):
    bench = _bench()
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    _job(cold, 0, "a", "sample", {"s1": "x", "s2": "y"})
    _job(cold, 1, "broken", "sample", None)
    _job(cold, 2, "b", "sample", {"s1": "z"})
    # the warm launcher ran b before the broken checkpoint, and wrote a's rows in another order
    _job(warm, 0, "a", "sample", {"s2": "y", "s1": "x"})
    _job(warm, 1, "b", "sample", {"s1": "z"})
    _job(warm, 2, "broken", "sample", None)
    cold_jobs, warm_jobs = bench.sweep_jobs(cold), bench.sweep_jobs(warm)
    assert bench.same_outputs(cold, warm, cold_jobs, warm_jobs) == {
        "equal": True, "jobs_compared": 2, "differing": [], "complete_in_one_only": []}

    (warm / "1" / "samples.parquet").unlink()
    pl.DataFrame({"sample_id": ["s1"], "output": ["other"]}).write_parquet(warm / "1" / "samples.parquet")
    assert bench.same_outputs(cold, warm, cold_jobs, warm_jobs)["differing"] == ["b/sample"]


def test_a_job_that_completed_in_one_sweep_only_is_not_equal(tmp_path):
    bench = _bench()
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    _job(cold, 0, "a", "sample", {"s1": "x"})
    _job(warm, 0, "a", "sample", None)
    result = bench.same_outputs(cold, warm, bench.sweep_jobs(cold), bench.sweep_jobs(warm))
    assert result == {"equal": False, "jobs_compared": 0, "differing": [], "complete_in_one_only": ["a/sample"]}


def test_time_to_first_generation_runs_from_the_job_start_to_the_first_shard(tmp_path):
    bench = _bench()
    _job(tmp_path, 0, "a", "sample", {"s1": "x"})
    job_dir = tmp_path / "0"
    (job_dir / "run.log").write_text(
        "[2026-12-03 13:39:36,000][toolsweep][INFO] - building prompts\n"
        "[2026-12-03 13:39:37,250][toolsweep][INFO] - shard 1/2: generating 12 requests\n"
        "[2026-12-03 13:39:38,500][toolsweep][INFO] - shard 2/2: generating 12 requests\n")
    ended = bench.log_time("[2026-12-03 13:39:40,000]")  # job.json written 5 s (its wall_s) after the start
    os.utime(job_dir / "job.json", (ended, ended))
    assert abs(bench.to_first_generation(job_dir) - 2.25) < 1e-3

    (job_dir / "run.log").write_text("[2026-12-03 13:39:36,000][toolsweep][INFO] - loading model\n")
    assert bench.to_first_generation(job_dir) is None


# ---------------------------------------------------------------- section peers: toolsweep against BFCL's runner
def test_cases_compare_one_by_one_and_a_case_missing_from_one_arm_is_not_equal():
    bench = _bench()
    assert bench.compare_cases({"a": "x", "b": "y"}, {"b": "y", "a": "x"}) == {
        "equal": True, "compared": 2, "differing": [], "missing": []}
    assert bench.compare_cases({"a": "x", "b": "y"}, {"a": "x", "b": "z"})["differing"] == ["b"]
    assert bench.compare_cases({"a": 5, "b": 6}, {"a": 5}) == {
        "equal": False, "compared": 1, "differing": [], "missing": ["b"]}


def test_a_difference_is_explained_by_where_the_texts_part():
    bench = _bench()
    assert bench.divergence("[f(a=1)]", "[f(a=1)] and more") == (
        "one output is a prefix of the other (8 vs 17 characters): a length cap or an early stop")
    assert bench.divergence("[f(a=1)]", "[f(a=2)]") == "first differ at character 5: '1)]' vs '2)]'"
    assert bench.divergence("[f(a=1)]", None) == "one arm has no output for this case (an error row)"


def test_an_arm_reports_its_rates_from_its_generation_wall():
    bench = _bench()
    arm = bench.arm_figures(generation_wall=4.0, command_wall=10.0, output_tokens=200, cases=8, note="n")
    assert arm["generation_wall"] == {"value": 4.0, "unit": "s", "note": "n"}
    assert arm["command_wall"]["value"] == 10.0
    assert arm["output_tokens"]["value"] == 200
    assert arm["tokens_per_s"]["value"] == 50.0 and arm["cases_per_s"]["value"] == 2.0


def test_peer_ratios_put_toolsweep_offline_over_each_peer_like_with_like():
    bench = _bench()
    arms = {name: bench.arm_figures(generation_wall=gen, command_wall=cmd, output_tokens=10, cases=2, note="")
            for name, gen, cmd in (("toolsweep_offline", 6.0, 30.0), ("bfcl_generate", 8.0, 12.0),
                                   ("toolsweep_server", 7.0, 20.0), ("floor", 5.0, 25.0))}
    ratios = bench.peer_ratios(arms, server_start=18.0)
    assert ratios["toolsweep_over_bfcl"]["value"] == 0.75
    assert ratios["toolsweep_over_floor"]["value"] == 1.2
    assert ratios["toolsweep_server_over_bfcl"]["value"] == 0.875
    # whole commands: BFCL's run needs the server it talks to, so its start-up counts on its side
    assert ratios["toolsweep_over_bfcl_command"]["value"] == 1.0
    assert ratios["toolsweep_over_floor_command"]["value"] == 1.2
    assert ratios["targets"] == {"toolsweep_over_floor_at_most_1.05": False, "toolsweep_over_bfcl_at_most_1.0": True}


def test_bfcl_requirements_are_its_wheels_own_less_the_memory_backends_plus_the_tokenizer(tmp_path):
    import zipfile

    bench = _bench()
    wheel = tmp_path / "bfcl_eval-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("bfcl_eval-1.0.dist-info/METADATA", "Name: bfcl-eval\nRequires-Dist: requests\n"
                         "Requires-Dist: numpy==1.26.4\nRequires-Dist: sentence-transformers>=2.7.0\n"
                         "Requires-Dist: faiss-cpu==1.11.0\nRequires-Dist: vllm==0.8.5; extra == \"oss-eval-vllm\"\n")
    assert bench.bfcl_requirements(wheel, ["transformers==5.0"]) == ["requests", "numpy==1.26.4", "transformers==5.0"]


def test_bfcl_results_are_read_by_case_id_from_its_result_tree(tmp_path):
    bench = _bench()
    folder = tmp_path / "result" / "Qwen_Qwen3-0.6B" / "non_live"
    folder.mkdir(parents=True)
    rows = [{"id": "simple_python_1", "result": "[g()]", "input_token_count": 300, "output_token_count": 4,
             "latency": 2.5},
            {"id": "simple_python_0", "result": "[f(x=1)]", "input_token_count": 310, "output_token_count": 7,
             "latency": 3.0}]
    (folder / "BFCL_v4_simple_python_result.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    found = bench.read_bfcl_results(tmp_path / "result")
    assert list(found) == ["simple_python_0", "simple_python_1"]
    assert found["simple_python_0"] == {"output": "[f(x=1)]", "prompt_tokens": 310, "output_tokens": 7, "latency": 3.0,
                                        "prompt": None}


def test_the_server_gets_cpu_only_flags_on_a_cpu_only(tmp_path):
    bench = _bench()
    cpu = bench.server_command(tmp_path, 8001, "float32", on_cpu=True, kv_cache_bytes=2**31)
    gpu = bench.server_command(tmp_path, 8001, "auto", on_cpu=False, kv_cache_bytes=2**31, environ={})
    assert cpu[cpu.index("--kv-cache-memory-bytes") + 1] == str(2**31) and "--enforce-eager" in cpu
    assert "--kv-cache-memory-bytes" not in gpu and "--enforce-eager" not in gpu
    assert gpu[gpu.index("--model") + 1] == str(tmp_path) and gpu[gpu.index("--dtype") + 1] == "auto"


def test_peer_figures_list_each_differing_case_with_its_reason_and_token_difference():
    bench = _bench()

    def arm(outputs, prompt_tokens, latency=None):
        return {case: {"output": out, "prompt_tokens": n, "output_tokens": 3, "latency": latency}
                for (case, out), n in zip(outputs.items(), prompt_tokens)}

    same = {"simple_python_0": "[f(a=1)]", "simple_python_1": "[g()]"}
    rows = {"toolsweep_offline": arm(same, [446, 374]), "toolsweep_server": arm(same, [446, 374]),
            "floor": arm(same, [446, 374]),
            "bfcl_generate": arm({"simple_python_0": "[f(a=2)]", "simple_python_1": "[g()]"}, [447, 374], 2.0)}
    walls = {arm_name: 4.0 for arm_name in rows}
    figures = bench.peer_figures(rows, walls, {k: 3.0 for k in ("toolsweep_offline", "toolsweep_server", "floor")},
                                 server_start=1.0)
    assert figures["bfcl_generate"]["generation_wall"]["value"] == 2.0  # its longest case latency
    assert figures["outputs_equal"]["floor"]["equal"] and figures["outputs_equal"]["toolsweep_server"]["equal"]
    bfcl = figures["outputs_equal"]["bfcl_generate"]
    assert bfcl["differing"] == ["simple_python_0"]
    assert bfcl["reasons"] == {"simple_python_0": "first differ at character 5: '1)]' vs '2)]'"}
    assert figures["prompt_tokens_equal"]["bfcl_generate"]["per_case_difference"] == {"simple_python_0": 1}
    assert figures["toolsweep_over_bfcl"]["value"] == 1.5


def test_a_shared_gpu_gives_the_server_the_part_toolsweep_engines_take():
    bench = _bench()
    shared = {"TOOLSWEEP_GPU_MEMORY_UTILIZATION": "0.3", "TOOLSWEEP_ENFORCE_EAGER": "true"}
    command = bench.server_command(Path("/m"), 8001, "auto", on_cpu=False, kv_cache_bytes=1, environ=shared)
    assert command[command.index("--gpu-memory-utilization") + 1] == "0.3" and "--enforce-eager" in command
    assert bench.gpu_share({}) == {}
