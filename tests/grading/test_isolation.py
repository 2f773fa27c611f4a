"""grading/ must run on any laptop: it never imports inference, vllm or torch."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

PROBE = """
import sys
import importlib, pkgutil
import grading
for module in pkgutil.walk_packages(grading.__path__, "grading."):
    importlib.import_module(module.name)
assert "grading.scorers.toolspectrum_f1" in sys.modules, "the scorers were imported too"
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'inference', 'vllm', 'torch', 'transformers'})
print(','.join(heavy))
"""


def test_grading_imports_nothing_heavy():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_grading_sources_never_name_inference_or_engines():
    for path in (REPO / "grading").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for banned in ("import inference", "from inference", "import vllm", "import torch"):
            assert banned not in text, f"{path.name} contains {banned!r}"
