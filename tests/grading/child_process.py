"""Run a reader or a grading entry point in a child process, with a memory cap and a time limit:
a reader that hangs on a hostile answer fails its test, naming the limit, instead of hanging the
suite, and one that builds a huge value meets a MemoryError instead of the machine's swap."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import REPO

CHILD_MEMORY = 8 << 30
"""Address space (bytes) a child may take: room for the thread arenas polars and pyarrow reserve
(about 2.5 GB of address space, little of it used; a tighter cap fails their allocations), far
less than a hostile value takes."""
LIMIT_S = 60
"""Seconds a child may run: far past what a bounded reader takes, short enough for a hung one."""

_READ = """
import json, sys
from {module} import {name} as read
text = sys.stdin.read()
try:
    result = read(text)
except Exception as exc:
    print(json.dumps({{"ok": False, "raised": type(exc).__name__, "error": str(exc)[:300]}}))
else:
    print(json.dumps({{"ok": getattr(result, "ok", True), "raised": None, "error": getattr(result, "error", None)}}))
"""


def run_in_child(source: str, stdin: str = "", limit_s: float = LIMIT_S) -> str:
    """Python `source` run in a child from the repository root; its stdout. The test fails where
    the child runs past `limit_s` or exits with an error."""
    cap = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({CHILD_MEMORY}, {CHILD_MEMORY}))\n"
    try:
        done = subprocess.run([sys.executable, "-c", cap + source], input=stdin, capture_output=True, text=True,
                              timeout=limit_s, cwd=REPO)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child did not finish within {limit_s} s: it hangs")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def read_in_child(reader: str, text: str) -> dict[str, Any]:
    """`module:function` applied to `text` in a child: {ok, raised (an exception's class name, or
    None), error (the reader's reason or the exception's text)}."""
    module, name = reader.split(":")
    return json.loads(run_in_child(_READ.format(module=module, name=name), stdin=text))
