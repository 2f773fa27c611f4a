"""Run BFCL's own multi-turn loop and checker on scripted model outputs; write their verdicts.

Not part of toolsweep (it imports BFCL, which toolsweep never does). Run it with a Python that has
BFCL's package and the few modules its multi-turn path imports, e.g.:

    python3 -m venv /tmp/bfclref
    /tmp/bfclref/bin/pip install --no-deps bfcl-eval==2026.3.23
    /tmp/bfclref/bin/pip install tenacity overrides python-dotenv tqdm \
        filelock==3.20.0 mpmath==1.3.0 numpy==1.26.4
    /tmp/bfclref/bin/python scripts/bfcl_multi_turn_reference.py

(filelock, mpmath and numpy at the versions bfcl-eval pins: the math environment's results depend on
mpmath.) For every case of BFCL's four multi-turn categories and every script variant of
tests/bfcl_multi_turn_scripts.py, this runs BFCL's own code: `BaseHandler.inference_multi_turn_prompting`
(model_handler/base_handler.py) with a handler derived from BFCL's `OSSHandler`
(local_inference/base_oss_handler.py), so the message handling and `decode_execute`
(`default_decode_execute_prompting`) are BFCL's; only `_query_prompting` is replaced, by one that
returns the script's next text. Then BFCL's `_evaluate_single_multi_turn_entry` (eval_checker/eval_runner.py)
grades the responses the loop recorded. Test entries are loaded as BFCL loads them: `load_dataset_entry`
for generation (function docs, held-out functions, language hint) and again without the hint for
evaluation, as `evaluate_task` does. The modules replaced by empty stand-ins below (every model
handler, tree-sitter parsers, pandas helpers, the OpenAI client) are never called on this path.

BFCL keeps environment instances in a module-level cache keyed by model name and entry id; every
(case, variant) run has its own model name, and its instances are dropped once it is graded.

Writes tests/grading/data/bfcl_multi_turn_reference.json: per case and variant `valid`, `error_type`
(BFCL's, None when valid), `steps` (the steps BFCL's loop recorded in each turn it ran, the step that
ends a turn included; no turn runs after a force quit, so fewer entries than turns means one, while one
in the last turn leaves a full list) and `tool` (the first 16 hex digits of the SHA-256 of the compact
JSON list of every execution result the loop fed back, in order). `--messages CASE VARIANT` prints
the messages BFCL's loop built for one run instead.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import importlib.metadata
import io
import json
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "grading" / "data" / "bfcl_multi_turn_reference.json"
CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
HASH_HEX = 16
FIELDS = {
    "valid": "BFCL's verdict (_evaluate_single_multi_turn_entry)",
    "error_type": "BFCL's error_type, null when valid",
    "steps": "steps BFCL's loop recorded in each turn it ran (the ending no-call step included); after a force "
             "quit (21 call steps in a turn) no later turn runs, so fewer entries than turns means one",
    "tool": "sha256(json.dumps(results, separators=(',', ':')).encode('utf-8')).hexdigest()[:16], results "
            "being every execution result string BFCL's loop fed back, in order",
}

sys.path.insert(0, str(REPO))
from tests.bfcl_multi_turn_scripts import VARIANTS, scripts  # noqa: E402


def _stub(name: str, **attributes) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module


class _NoClient:
    """Stands in for `openai.OpenAI`, which OSSHandler builds for a server this script never asks."""

    def __init__(self, *args, **kwargs) -> None:
        pass


def _install_stubs() -> None:
    _stub("bfcl_eval.constants.model_config", MODEL_CONFIG_MAPPING={})
    _stub("bfcl_eval.model_handler.parser.java_parser", parse_java_function_call=None)
    _stub("bfcl_eval.model_handler.parser.js_parser", parse_javascript_function_call=None)
    _stub("bfcl_eval.eval_checker.agentic_eval.agentic_checker", agentic_checker=None)
    _stub("bfcl_eval.eval_checker.eval_runner_helper")
    _stub("openai", OpenAI=_NoClient)
    _stub("requests")


def _scripted_handler_class():
    # `overrides` finds a base class by the global name the class statement loads, so it is global here
    global OSSHandler
    from bfcl_eval.model_handler.local_inference.base_oss_handler import OSSHandler
    from overrides import override

    class ScriptedHandler(OSSHandler):
        """BFCL's prompting handler whose model is a list of texts, one per query."""

        def __init__(self, model_name: str, texts: list[str]) -> None:
            super().__init__(model_name, 0.0, model_name, False)
            self.texts = texts
            self.queries = 0
            self.last_messages: list[dict] = []

        @override
        def _query_prompting(self, inference_data: dict):
            self.last_messages = inference_data["message"]
            text = self.texts[self.queries] if self.queries < len(self.texts) else ""
            self.queries += 1
            usage = types.SimpleNamespace(prompt_tokens=0, completion_tokens=0)
            return types.SimpleNamespace(choices=[types.SimpleNamespace(text=text)], usage=usage), 0.0

    return ScriptedHandler


def _load_cases():
    """(category, generation entry, evaluation entry, ground truth) per case, as BFCL loads them."""
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    cases = []
    for category in CATEGORIES:
        generation = load_dataset_entry(category)
        evaluation = load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
        answers = load_ground_truth_entry(category)
        for gen, ev, answer in zip(generation, evaluation, answers, strict=True):
            if not gen["id"] == ev["id"] == answer["id"]:
                raise SystemExit(f"entries out of step in {category}: {gen['id']}, {ev['id']}, {answer['id']}")
            cases.append((category, gen, ev, answer["ground_truth"]))
    return cases


def _run(handler_class, name: str, category: str, gen: dict, ev: dict, gt: list[list[str]], texts: list[str]):
    """BFCL's loop then BFCL's grading of one scripted case; returns (verdict, handler)."""
    from bfcl_eval.eval_checker import eval_runner

    handler = handler_class(name, texts)
    steps: list[int] = []
    tool: list[str] = []
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            responses, metadata = handler.inference_multi_turn_prompting(copy.deepcopy(gen), False, True)
            steps = [len(turn) for turn in responses]
            tool = _tool_results(metadata["inference_log"])
            result = eval_runner._evaluate_single_multi_turn_entry(
                handler, gen["id"], responses, gt, copy.deepcopy(ev), name, category)
        error_type = None if result["valid"] else result["error"]["error_type"]
        verdict = {"valid": result["valid"], "error_type": error_type}
    except Exception as exc:  # noqa: BLE001 - BFCL's code stops here; the verdict says so
        verdict = {"valid": False, "error_type": f"raises:{type(exc).__name__}"}
    finally:
        _forget_instances(name)
    digest = hashlib.sha256(json.dumps(tool, separators=(",", ":")).encode("utf-8")).hexdigest()
    return {**verdict, "steps": steps, "tool": digest[:HASH_HEX]}, handler


def _tool_results(inference_log: list) -> list[str]:
    """Every execution result the loop fed back, in order, from BFCL's own inference log."""
    results = []
    for turn in inference_log:
        if not isinstance(turn, dict):
            continue  # a state snapshot, not a turn
        for key, entries in turn.items():
            if key.startswith("step_"):
                results.extend(entry["content"] for entry in entries if entry.get("role") == "tool")
    return results


def _forget_instances(name: str) -> None:
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    cache = vars(multi_turn_utils)
    for key in [key for key in cache if key.startswith(f"{name}_")]:
        del cache[key]


def _write(verdicts: dict) -> None:
    head = {"bfcl_eval": importlib.metadata.version("bfcl-eval"), "python": sys.version.split()[0],
            "mpmath": importlib.metadata.version("mpmath"), "made_by": "scripts/bfcl_multi_turn_reference.py",
            "variants": list(VARIANTS), "fields": FIELDS}
    lines = [json.dumps(head, separators=(",", ":"))[:-1] + ',"verdicts":{']
    items = list(verdicts.items())
    for index, (case_id, by_variant) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        lines.append(json.dumps(case_id) + ":" + json.dumps(by_variant, separators=(",", ":")) + comma)
    lines.append("}}")
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", nargs=2, metavar=("CASE", "VARIANT"),
                        help="print the messages BFCL's loop built for one run, write nothing")
    args = parser.parse_args()
    _install_stubs()
    handler_class = _scripted_handler_class()
    cases = _load_cases()
    verdicts: dict[str, dict] = {}
    runs, started = 0, time.perf_counter()
    for category, gen, ev, gt in cases:
        by_variant = {}
        for variant, texts in scripts(gen, gt).items():
            if args.messages and [gen["id"], variant] != args.messages:
                continue
            verdict, handler = _run(handler_class, f"script{runs}_{variant}", category, gen, ev, gt, texts)
            runs += 1
            if args.messages:
                print(json.dumps({"verdict": verdict, "messages": handler.last_messages}, indent=1))
                return
            by_variant[variant] = verdict
        verdicts[gen["id"]] = by_variant
        if len(verdicts) % 50 == 0 and not args.messages:
            print(f"{len(verdicts)} cases, {runs} runs, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.messages:
        raise SystemExit(f"no run {args.messages[1]!r} for case {args.messages[0]!r}")
    seconds = time.perf_counter() - started
    _write(verdicts)
    print(f"{runs} runs over {len(verdicts)} cases in {seconds:.1f} s (BFCL's loop and grading); "
          f"wrote {OUT.relative_to(REPO)} ({OUT.stat().st_size} bytes)")
    for case_id, by_variant in verdicts.items():
        for variant in ("gt_turn", "gt_call"):
            if not by_variant[variant]["valid"]:
                print(f"defect: {case_id} {variant} {by_variant[variant]['error_type']}")


if __name__ == "__main__":
    main()
