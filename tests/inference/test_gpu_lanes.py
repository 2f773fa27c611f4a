"""`hydra/launcher=local_gpus` on warm workers: the sweep's engine groups dealt whole to one lane per
GPU slot, each lane one warm worker holding its slot for its life; reuse_engine=false is Hydra's
joblib launcher (one process per job)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.conftest import REPO, tiny_args
from tests.inference.test_gpu_node import fake_smi
from tests.inference.test_warm_workers import _job, _sweep


@pytest.mark.parametrize("groups,lanes,dealt", [
    ([[0, 1], [2, 3]], 2, [[0, 1], [2, 3]]),
    ([[0], [1, 2, 3], [4, 5]], 2, [[0, 4, 5], [1, 2, 3]]),
    ([[0, 1, 2, 3]], 3, [[0, 1, 2, 3]]),
    ([[3], [1], [0], [2]], 2, [[3, 0], [1, 2]]),
    ([[0], [1], [2]], 1, [[0, 1, 2]]),
], ids=["one_group_each", "largest_first_to_the_emptiest", "fewer_groups_than_lanes_leave_lanes_out",
        "ties_go_to_the_first_lane_groups_in_plan_order", "one_lane_runs_the_plan"])
def test_groups_are_dealt_whole_to_lanes_balanced_by_jobs(groups, lanes, dealt):
    from hydra_plugins.toolsweep_launcher.gpus_launcher import split_lanes

    assert split_lanes(groups, lanes) == dealt
    assert split_lanes(groups, lanes) == dealt, "the same plan, the same lanes"


def _launcher_config(tmp_path: Path, monkeypatch, *overrides: str):
    from hydra import compose, initialize_config_dir

    import inference.cli  # noqa: F401 - registers the config schema and resolvers

    monkeypatch.setenv("PATH", fake_smi(tmp_path / "bin", gpus=2)["PATH"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=["hydra/launcher=local_gpus", *overrides],
                       return_hydra_config=True).hydra.launcher


def test_local_gpus_composes_warm_by_default_and_joblib_exactly_without(tmp_path, monkeypatch):
    """reuse_engine=false hands the launch to the joblib launcher, with joblib's options only."""
    from hydra.utils import instantiate

    import hydra_plugins.hydra_joblib_launcher._core as joblib_core

    warm = instantiate(_launcher_config(tmp_path, monkeypatch))
    # by name: Hydra's plugin scan may run the module again, a class of its own each time
    assert (type(warm).__module__, type(warm).__name__) == ("hydra_plugins.toolsweep_launcher.gpus_launcher",
                                                            "GpusLauncher")
    assert warm.reuse_engine is True
    assert warm.joblib["n_jobs"] == 2 and warm.joblib["backend"] == "loky", "one lane per GPU slot"
    cold = instantiate(_launcher_config(tmp_path, monkeypatch, "hydra.launcher.reuse_engine=false",
                                        "hydra.launcher.n_jobs=1"))
    assert cold.reuse_engine is False
    seen = []
    monkeypatch.setattr(joblib_core, "launch", lambda launcher, job_overrides, initial_job_idx: seen.append(
        (dict(launcher.joblib), list(job_overrides), initial_job_idx)) or ["returned"])
    assert cold.launch([["a=1"], ["a=2"]], 4) == ["returned"]
    options, jobs, first = seen[0]
    assert (jobs, first) == ([["a=1"], ["a=2"]], 4)
    assert "reuse_engine" not in options and options["n_jobs"] == 1 and options["prefer"] == "processes"


def _gpus_seen_by_the_sweep_only(folder: Path, gpus: int) -> dict[str, str]:
    """fake_smi's node, whose nvidia-smi lists no GPU to a process given CUDA_VISIBLE_DEVICES: the
    sweep's process sees the GPU node and deals its slots, each job's engine sees a CPU node and
    starts on the CPU build (which would refuse a node that lists GPUs)."""
    env = fake_smi(folder, gpus=gpus)
    script = folder / "nvidia-smi"
    hidden = '#!/bin/sh\n[ -n "$CUDA_VISIBLE_DEVICES" ] && exit 0\n'
    script.write_text(script.read_text().replace("#!/bin/sh\n", hidden))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return env


def test_each_gpu_slot_runs_its_lane_of_engines_on_one_warm_worker(tmp_path, tiny_model, scratch_env):
    """Four jobs (two seeds x two settings, the seed varying slowest: each seed's engine is jobs 0, 1
    and 2, 3) on a node of three GPUs with two lanes: each seed's jobs run on one lane's worker, the
    second on the engine the first loaded, and the worker keeps the slot it took for its first job
    (job 1 alone would take slot 1, job 3 slot 0); the lanes' slots differ. Rerun into its dir, the
    sweep keeps all four jobs without starting a worker."""
    env = {**scratch_env, **_gpus_seen_by_the_sweep_only(tmp_path / "bin", gpus=3)}
    args = [*tiny_args(tiny_model), "decoding.seed=0,1", "dataset.settings=[p],[r]", "decoding.temperature=1.0",
            "dataset.limit=2", "engine.cache=false", "hydra/launcher=local_gpus", "hydra.launcher.n_jobs=2"]
    sweep = tmp_path / "sweep"
    done = _sweep(sweep, args, env)
    out = done.communicate()[0]
    assert done.returncode == 0, out[-3000:]
    jobs = {n: _job(sweep, n) for n in range(4)}
    assert all(job["status"] == "complete" for job, _, _ in jobs.values()), [j[0] for j in jobs.values()]
    devices = {n: jobs[n][0]["cuda_visible_devices"] for n in range(4)}
    assert devices[0] == devices[1] and devices[2] == devices[3] and devices[0] != devices[2], devices
    for first, second in ((0, 1), (2, 3)):
        assert jobs[first][0]["worker"] == "fresh" and jobs[first][1]["roles"]["model"]["engine_start"]["how"] == "cold"
        assert jobs[second][0]["worker"] == "warm", jobs[second][0]
        assert jobs[second][1]["roles"]["model"]["engine_start"]["how"] == "reused"
    assert jobs[0][2].height == 2 and not jobs[0][2].equals(jobs[2][2]), "the two seeds' lanes answer alike"

    before = {n: (sweep / str(n) / "run.json").read_bytes() for n in range(4)}
    rerun = _sweep(sweep, args, env)
    again = rerun.communicate()[0]
    assert rerun.returncode == 0, again[-3000:]
    for number in range(4):
        assert f"job {number}" in again and json.loads((sweep / str(number) / "job.json").read_text())["status"] \
            == "complete", again[-3000:]
        assert (sweep / str(number) / "run.json").read_bytes() == before[number], f"job {number} ran again"
    assert again.count("complete (kept from an earlier run of this sweep)") == 4, again[-3000:]
