"""Fill tests/grading/data/acebench_probes.json with the verdicts ACEBench's own evaluation gives.

A developer tool, run outside toolsweep (any Python 3.9+, no toolsweep import) against an ACEBench
checkout, so that the project never holds ACEBench's code:

    git clone https://github.com/ACEBench/ACEBench /tmp/acebench   # the commit is recorded in the file
    python3 scripts/acebench_reference_verdicts.py /tmp/acebench tests/grading/data/acebench_probes.json

Each probe answer goes alone through ACEBench's `eval_main.normal_single_turn_eval` (category
normal_preference, a model name without "FC", so its Python-list reader), with the probe's case as
the prompt and possible-answer records; its accuracy (1.0 or 0.0) is the verdict and the error_type
of its score file the reason. Where ACEBench raises, the verdict is null and the exception is kept.
Its spreadsheet export is switched off and pandas/openpyxl are stubbed (only that export uses them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path


def load_evaluator(checkout: Path):
    """ACEBench's eval_main, imported from the checkout, writing its score files to a temp dir."""
    sys.path.insert(0, str(checkout))
    for name in ("pandas", "openpyxl", "openpyxl.styles"):
        stub = types.ModuleType(name)
        stub.Workbook = stub.Alignment = object
        sys.modules.setdefault(name, stub)
    os.chdir(checkout)
    import eval_main  # noqa: E402 (ACEBench's module, from the checkout)

    eval_main.OUTPUT_PATH = tempfile.mkdtemp()
    eval_main.convert_result_to_excel = lambda *args, **kwargs: None
    return eval_main


def verdict(evaluator, functions: list, ground_truth, output: str) -> dict:
    """ACEBench's outcome for one answer."""
    ident = "normal_preference_0"
    try:
        accuracy = evaluator.normal_single_turn_eval(
            [{"id": ident, "result": output}], [{"id": ident, "question": "user: probe\n", "function": functions}],
            [{"id": ident, "ground_truth": ground_truth}], "normal_preference", "probe", None)
    except Exception as exc:  # its whole evaluation stops here
        return {"valid": None, "error_type": None, "raised": f"{type(exc).__name__}: {exc}"}
    score = Path(evaluator.OUTPUT_PATH, "probe", "data_normal_preference_score.json")
    entries = [json.loads(line) for line in score.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    return {"valid": accuracy == 1.0, "error_type": entries[0]["error_type"] if entries else None, "raised": None}


def main() -> None:
    checkout, probes_file = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    data = json.loads(probes_file.read_text(encoding="utf-8"))
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    evaluator = load_evaluator(checkout)
    for probe in data["probes"]:
        case = data["cases"][probe["case"]]
        probe["upstream"] = verdict(evaluator, case["functions"], case["ground_truth"], probe["output"])
    data["upstream_commit"] = commit.strip() or None
    data["upstream_python"] = sys.version.split()[0]
    probes_file.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    valid = sum(p["upstream"]["valid"] is True for p in data["probes"])
    raised = sum(p["upstream"]["valid"] is None for p in data["probes"])
    print(f"{len(data['probes'])} probes: {valid} valid, {raised} raised, the rest wrong")


if __name__ == "__main__":
    main()
