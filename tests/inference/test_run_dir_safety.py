"""Two runs on one run dir, stale locks, and damaged cache files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from inference.cache import GenerationStore
from inference.engines import Generation
from inference.gold import gold_outputs, write_predictions
from inference.benchmarks.petoolbench import load_petoolbench
from tests.conftest import REPO, SAMPLE
from tests.inference.test_end_to_end import run_toolsweep


def _replay_args(tmp_path: Path) -> list[str]:
    preds = write_predictions(gold_outputs(load_petoolbench(SAMPLE, ["p"])), tmp_path / "gold.jsonl")
    return ["engine=replay", f"engine.predictions={preds}", "dataset.settings=[p]"]


def test_a_second_run_on_a_live_run_dir_exits_2_and_a_stale_lock_is_taken_over(tmp_path):
    run_dir, args = tmp_path / "run", _replay_args(tmp_path)
    env = {**os.environ, "TOOLSWEEP_PAUSE_AT": "building prompts", "TOOLSWEEP_PAUSE_S": "120"}
    first = subprocess.Popen([sys.executable, "-m", "inference.cli", f"hydra.run.dir={run_dir}", *args], cwd=REPO,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        for line in first.stderr:
            if "building prompts" in line:
                break
        second = run_toolsweep(run_dir, args, timeout=120)
        assert second.returncode == 2, second.stderr
        assert f"run dir {run_dir} is in use by toolsweep pid {first.pid} on this machine" in second.stderr
        assert "Traceback" not in second.stderr
        # held before the config is typed and checked (seconds for ETAPP): a config with an error
        # is still refused for the lock, which comes first
        early = run_toolsweep(run_dir, [*args, "dataset.limit=-1"], timeout=120)
        assert early.returncode == 2 and "is in use by toolsweep pid" in early.stderr, early.stderr
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    third = run_toolsweep(run_dir, args, timeout=120)
    assert third.returncode == 0, third.stderr
    assert f"taking over the stale lock of pid {first.pid}" in third.stderr
    assert not (run_dir / ".toolsweep.lock").exists(), "released when the run ends"


def test_an_unreadable_cache_file_is_skipped_with_a_warning(tmp_path, capsys):
    cache = tmp_path / "cache"
    store = GenerationStore(tmp_path / "run_a", cache)
    store.write_part(["k1"], [Generation("p-1", "out", "stop", 3)], "outlines")
    (cache / "garbage.parquet").write_bytes(b"this is not parquet")
    found = GenerationStore(tmp_path / "run_b", cache).lookup(["k1", "k2"])
    assert found == {"k1": Generation("p-1", "out", "stop", 3)}
    err = capsys.readouterr().err
    assert "warning: skipping unreadable generation file" in err and "garbage.parquet" in err


def test_a_killed_process_not_yet_reaped_holds_no_lock():
    """A SIGKILLed sweep's worker stays a zombie until it is reaped: its pid still answers, but a
    rerun must take its run dir over, not wait on it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from inference.runinfo import _alive

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert _alive(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.time() + 10
        while not open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
            assert time.time() < deadline, "the killed child never became a zombie"
            time.sleep(0.05)
        assert not _alive(child.pid), "a zombie was taken for a live lock holder"
    finally:
        child.kill()
        child.wait()
