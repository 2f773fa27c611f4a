"""Processes forked from the preloaded template (inference/preload.py) behave as `python -m`
would: their argv, environment, working dir, streams and exit codes are their own, they die with
the process that started them, and a child whose environment the template cannot give is a new
interpreter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO
from tests.processes import alive, descendants, named

CHILD = """
import os, sys, time
print("argv", sys.argv[1:], "cwd", os.getcwd(), "vars", os.environ.get("TOOLSWEEP_X"),
      os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
sys.stderr.write("to stderr\\n")
if sys.argv[1] in ("sleep", "5"):
    time.sleep(600 if sys.argv[1] == "sleep" else 1)
sys.exit(int(sys.argv[1]))
"""

PARENT = """
import json, os, signal, sys
from inference import preload
env = {**os.environ, "TOOLSWEEP_X": "per-run", "CUDA_VISIBLE_DEVICES": "3"}
seen = {}
child = preload.spawn("probe_child", ["3"], env, "probe-kid", pipes=True, cwd=sys.argv[1])
seen["piped"] = child.stdout.read().decode()
seen["piped_code"] = child.wait()
seen["piped_forked"] = isinstance(child, preload.Child)
sys.stdout.flush()
quiet = preload.spawn("probe_child", ["0"], env, "probe-kid")
seen["shared_code"] = quiet.wait()
sleeper = preload.spawn("probe_child", ["sleep"], env, "probe-kid", pipes=True)
sleeper.stdout.readline()
seen["running"] = sleeper.poll()
os.kill(sleeper.pid, signal.SIGTERM)
seen["sigterm_code"] = sleeper.wait(30)
other = preload.spawn("probe_child", ["0"], {**env, "PYTHONHASHSEED": "7"}, "probe-kid", pipes=True)
seen["other_env_forked"] = isinstance(other, preload.Child)
other.wait()
middle = preload.spawn("probe_nested", [], env, "probe-mid", pipes=True, nested=True)
seen["nested"] = json.loads(middle.stdout.readline())
print("RESULT " + json.dumps(seen), flush=True)
last = preload.spawn("probe_child", ["sleep"], env, "probe-kid", pipes=True)
last.stdout.readline()
print("SLEEPING", flush=True)
last.wait()
"""

# A child started with nested=True (a run a test kills, tests/warm.py `forked`) whose own child loads a model.
NESTED = """
import json, os
from inference import preload
kid = preload.spawn("probe_child", ["sleep"], dict(os.environ), "probe-grandkid", pipes=True)
kid.stdout.readline()
def parent_of(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
forker = parent_of(kid.pid)
print(json.dumps({"forked": isinstance(kid, preload.Child), "interpreter_template": preload._TEMPLATE is not None,
                  "forker_is_mine": parent_of(forker) == os.getpid(),
                  "forker_name": open(f"/proc/{forker}/comm").read().strip()}), flush=True)
kid.wait()
"""


def test_a_forked_child_is_its_own_process_and_dies_with_its_starter(tmp_path):
    """...and a child started `nested` forks its own children from a template it forked of itself
    (no new interpreter importing torch and vLLM again), all of them below it and gone with it."""
    (tmp_path / "probe_child.py").write_text(CHILD)
    (tmp_path / "probe_nested.py").write_text(NESTED)
    (tmp_path / "parent.py").write_text(PARENT)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}"}
    parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py"), str(tmp_path)], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        lines = []
        for line in parent.stdout:
            lines.append(line)
            if line.startswith("SLEEPING"):
                break
        said = "".join(lines)
        assert "SLEEPING" in said, said + parent.stderr.read()
        seen = json.loads(said.split("RESULT ", 1)[1].splitlines()[0])
        assert seen["piped_forked"] and seen["piped_code"] == 3
        assert seen["piped"] == f"argv ['3'] cwd {tmp_path} vars per-run 3\nto stderr\n", "its stderr joins the pipe"
        assert "argv ['0'] cwd" in said, "a child without pipes writes to its starter's stdout"
        assert seen["shared_code"] == 0 and seen["running"] is None and seen["sigterm_code"] == -signal.SIGTERM
        assert seen["other_env_forked"] is False, "an environment the template was not started with: a new interpreter"
        assert seen["nested"] == {"forked": True, "interpreter_template": False, "forker_is_mine": True,
                                  "forker_name": "toolsweep-tmpl"}, seen["nested"]

        below = descendants(parent.pid)
        templates, sleeping = named(parent.pid, "toolsweep-tmpl"), named(parent.pid, "probe-kid")
        assert len(templates) == 2 and len(sleeping) == 1, below  # the starter's and the nested child's
        assert len(named(parent.pid, "probe-grandkid")) == 1, below
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    finally:  # a failed assertion above leaves nothing running
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()
    assert not alive(list(below)), f"the killed starter's template or child lives on: {below}"


def test_no_template_where_switched_off(tmp_path, monkeypatch):
    from inference import preload

    (tmp_path / "probe_child.py").write_text(CHILD)
    monkeypatch.setenv("TOOLSWEEP_PRELOAD", "0")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    child = preload.spawn("probe_child", ["5"], env, "probe-kid", pipes=True)
    assert isinstance(child, subprocess.Popen)
    assert b"argv ['5']" in child.stdout.readline()
    assert Path(f"/proc/{child.pid}/comm").read_text().strip() == "probe-kid", "named as a forked child is"
    assert child.wait(60) == 5


IMPORT_SETTINGS = """
import json, os, sys
from inference import preload, worker
sys.addaudithook(worker.record_import_settings)  # as worker_main installs it
start = dict(os.environ)
import sets_at_import  # the first job imports a library that sets variables of its own
template = preload._comparable(dict(os.environ))  # the first job's template is started with them
os.environ["TS_RUN_OWN"] = "job 1"  # and the job sets one of its own
worker._with_imported(start)  # the job's end: the worker's environment back
seen = {"kept": preload._comparable(dict(os.environ)) == template, "imported": worker.IMPORTED_ENV,
        "run_own": os.environ.get("TS_RUN_OWN")}
worker._with_imported({**start, "TS_LIB_FLAG": "TRUE"})  # a job that gives its own value keeps it
seen["given"] = os.environ["TS_LIB_FLAG"]
print(json.dumps(seen))
"""

SETS_AT_IMPORT = """
import os
os.environ.setdefault("TS_LIB_FLAG", "FALSE")
os.environ["TS_WHILE_LOADING"] = "1"  # set around loading a part, then removed (numpy does)
del os.environ["TS_WHILE_LOADING"]
"""


def test_a_warm_workers_later_jobs_keep_what_imports_set_so_their_solvers_fork_from_the_template(tmp_path):
    """A variable a library sets when imported (joblib's KMP_INIT_AT_FORK) belongs to the worker's
    process: resetting a job's environment dropped it, every later job's environment then differed
    from its template's and its solver processes were new interpreters (10-16 s of imports each)."""
    (tmp_path / "sets_at_import.py").write_text(SETS_AT_IMPORT)
    (tmp_path / "probe.py").write_text(IMPORT_SETTINGS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TS_")}
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py")], cwd=REPO, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}"}, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"kept": True, "imported": {"TS_LIB_FLAG": "FALSE"}, "run_own": None, "given": "TRUE"}
