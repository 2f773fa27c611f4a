"""Run BFCL's own decoding and checker on toolsweep's probe answers; write their verdicts.

Not part of toolsweep (it imports BFCL, which toolsweep never does). Run it with a Python that
has BFCL's package and the few modules its checker path imports, e.g.:

    python3 -m venv /tmp/bfclref
    /tmp/bfclref/bin/pip install --no-deps bfcl-eval==2026.3.23
    /tmp/bfclref/bin/pip install tenacity filelock overrides python-dotenv tqdm
    /tmp/bfclref/bin/python scripts/bfcl_reference_verdicts.py

Importing BFCL's evaluation runner pulls in every model handler (API clients, tree-sitter, pandas);
those modules are replaced by empty stand-ins below, none of which the AST path calls. What runs
is BFCL's own: `_evaluate_single_ast_entry` and `_evaluate_single_relevance_entry`
(eval_checker/eval_runner.py), with `default_decode_ast_prompting` (model_handler/utils.py) as
the prompt-mode handler's decoder and `QwenFCHandler.decode_ast` (local_inference/qwen_fc.py) as
the native one's, the real `ast_checker`. The model name is one whose config keeps dots in
function names (prompt mode and Qwen FC both do).

Reads tests/grading/data/bfcl_probes.json; writes tests/grading/data/bfcl_reference_verdicts.json.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "grading" / "data"
MODEL = "probe-model"


def _stub(name: str, **attributes) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module


@dataclass
class _Config:
    underscore_to_dot: bool = False


class _Handler:
    """The stand-in base classes BFCL's handler modules derive from (the methods they override)."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def decode_ast(self, result, language, has_tool_call_tag):
        raise NotImplementedError

    def decode_execute(self, result, has_tool_call_tag):
        raise NotImplementedError

    def _format_prompt(self, messages, function):
        raise NotImplementedError

    def _pre_query_processing_prompting(self, test_entry: dict) -> dict:
        raise NotImplementedError

    def _parse_query_response_prompting(self, api_response) -> dict:
        raise NotImplementedError

    def _add_assistant_message_prompting(self, inference_data: dict, model_response_data: dict) -> dict:
        raise NotImplementedError


def _install_stubs() -> None:
    _stub("bfcl_eval.constants.model_config", MODEL_CONFIG_MAPPING={MODEL: _Config()})
    for parser in ("java_parser", "js_parser", "json_parser", "xml_parser"):
        _stub(f"bfcl_eval.model_handler.parser.{parser}", parse_java_function_call=None,
              parse_javascript_function_call=None, parse_json_function_call=None,
              parse_concise_xml_function_call=None, parse_verbose_xml_function_call=None)
    _stub("bfcl_eval.eval_checker.agentic_eval.agentic_checker", agentic_checker=None)
    _stub("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker", multi_turn_checker=None,
          multi_turn_irrelevance_checker=None)
    _stub("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils", is_empty_execute_response=None)
    _stub("bfcl_eval.eval_checker.eval_runner_helper")
    _stub("bfcl_eval.model_handler.base_handler", BaseHandler=_Handler)
    _stub("bfcl_eval.model_handler.local_inference.base_oss_handler", OSSHandler=_Handler)


def main() -> None:
    _install_stubs()
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.eval_checker import eval_runner
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting

    class PromptHandler:
        def decode_ast(self, result, language, has_tool_call_tag):
            return default_decode_ast_prompting(result, language, has_tool_call_tag)

    handlers = {"prompt": PromptHandler(), "fc": QwenFCHandler(MODEL, 0, MODEL, True)}
    probes = json.loads((DATA / "bfcl_probes.json").read_text(encoding="utf-8"))
    verdicts = {}
    for probe in probes["probes"]:
        case = probes["cases"][probe["case"]]
        category, handler = case["category"], handlers[probe["format"]]
        entry = {"id": f"{category}_0", "function": case["function"]}
        try:
            if case["ground_truth"] is None:
                result = eval_runner._evaluate_single_relevance_entry(handler, entry["id"], probe["output"], entry,
                                                                      MODEL, category)
            else:
                result = eval_runner._evaluate_single_ast_entry(
                    handler, entry["id"], probe["output"], case["ground_truth"], entry, MODEL, category,
                    language=Language.PYTHON, return_format=ReturnFormat.PYTHON, has_tool_call_tag=False)
            verdicts[probe["probe"]] = {"valid": result["valid"], "error_type": result.get("error_type")}
        except Exception as exc:  # noqa: BLE001 - BFCL's evaluation stops here; the verdict says so
            verdicts[probe["probe"]] = {"valid": False, "error_type": f"raises:{type(exc).__name__}"}
    out = {"bfcl_eval": importlib.metadata.version("bfcl-eval"), "python": sys.version.split()[0],
           "made_by": "scripts/bfcl_reference_verdicts.py", "verdicts": verdicts,
           "system_prompts": _system_prompt_hashes(probes["cases"])}
    (DATA / "bfcl_reference_verdicts.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"{len(verdicts)} verdicts, {sum(v['valid'] for v in verdicts.values())} valid")


def _system_prompt_hashes(cases: dict) -> dict:
    """SHA-256 of BFCL's prompt-mode system turn for each probe case, as its generation builds it
    (language hint added to the function docs, then `system_prompt_pre_processing_chat_model`),
    without and with a system message of the question's own; not the texts themselves."""
    import copy
    import hashlib

    from bfcl_eval.model_handler.utils import system_prompt_pre_processing_chat_model
    from bfcl_eval.utils import add_language_specific_hint_to_function_doc

    hashes = {}
    for name, case in cases.items():
        entry = add_language_specific_hint_to_function_doc([{"id": f"{case['category']}_0",
                                                             "function": copy.deepcopy(case["function"])}])[0]
        for own in (None, "Answer in French."):
            messages = ([{"role": "system", "content": own}] if own else []) + [{"role": "user", "content": "hi"}]
            system = system_prompt_pre_processing_chat_model(messages, entry["function"], entry["id"])[0]["content"]
            hashes[f"{name}{'+own' if own else ''}"] = hashlib.sha256(system.encode("utf-8")).hexdigest()
    return hashes


if __name__ == "__main__":
    main()
