"""BFCL's prompt-mode system prompt, from BFCL's own texts read at run time, or toolsweep's wording.

BFCL builds a prompt-mode model's system prompt in `formulate_system_prompt`
(`bfcl_eval/model_handler/utils.py`) from the constants of `bfcl_eval/constants/default_prompts.py`:
the default format string (`DEFAULT_SYSTEM_PROMPT_FORMAT`: Python call syntax, no tags, functions
as JSON, plain text, classic style) picks a template (`PROMPT_TEMPLATE_MAPPING`), a style's
sentences (`PROMPT_STYLE_TEMPLATES`) and the answer format (`OUTPUT_FORMAT_MAPPING`,
`PARAM_TYPE_MAPPING`); the functions are `json.dumps(functions, indent=4)`, each description
first given the language hint of `_get_language_specific_hint` (`bfcl_eval/utils.py`). A question
that brings its own system message keeps it after BFCL's, joined by a blank line.

toolsweep ships none of those sentences. `dataset.bfcl_eval` names the user's copy of BFCL's code
(a gorilla checkout, its `bfcl_eval` folder, or the `bfcl_eval` wheel file); the two files are
parsed with `ast` and never imported: top-level assignments of literals (names of earlier
constants resolved), and the hint as the last string `_get_language_specific_hint` returns (its
`else` branch, the Python one). Without them the run uses `OWN`, toolsweep's wording, and one
notice line and run.json say which.
"""

from __future__ import annotations

import ast
import hashlib
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from inference.errors import DatasetError
from inference.python_source import literal_constants

PROMPTS_FILE = "bfcl_eval/constants/default_prompts.py"
UTILS_FILE = "bfcl_eval/utils.py"
MODES = ("auto", "upstream", "own")
_FORMAT_KEYS = ("ret_fmt", "tool_call_tag", "func_doc_fmt", "prompt_fmt", "style")
_NEEDED = ("DEFAULT_SYSTEM_PROMPT_FORMAT", "PROMPT_TEMPLATE_MAPPING", "PROMPT_STYLE_TEMPLATES",
           "OUTPUT_FORMAT_MAPPING", "PARAM_TYPE_MAPPING")
_HINT_FUNCTION = "_get_language_specific_hint"
_HELD_OUT = "DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING"


@dataclass(frozen=True)
class PromptTexts:
    """How a case's functions become its system prompt, and the hint each description gets."""

    source: str
    """upstream (BFCL's texts) or own (toolsweep's)."""
    template: str
    """The system prompt with `{functions}` where the function docs go."""
    hint: str
    """Appended to every function's description."""
    origin: Optional[str] = None
    sha256: dict[str, str] = field(default_factory=dict)
    prompt_format: Optional[str] = None
    held_out_template: Optional[str] = ("{functions}\nMore functions are available to you now: the ones listed "
                                        "above. Carry on with the request.")
    """Multi-turn `miss_func`: the user message of a held-out turn, `{functions}` where the docs go
    (BFCL's DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING; None: the copy lacks it)."""

    def held_out(self, functions: list[dict[str, Any]]) -> str:
        """A held-out turn's message: the docs as BFCL's `str.format` writes a list (Python's repr)."""
        if self.held_out_template is None:
            raise DatasetError(f"{self.origin}: {PROMPTS_FILE} has no {_HELD_OUT} with a {{functions}} field, which "
                               "multi_turn_miss_func announces its held-out functions with; use a newer copy of "
                               "BFCL, or set dataset.prompts=own")
        return self.held_out_template.replace("{functions}", str(functions))

    def functions_with_hint(self, functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The functions as BFCL shows them: every description followed by the language hint. The
        prompt-mode system turn lists them, and a native prompt's chat template gets them as its
        tool specs (as BFCL's Hermes-style FC handler gives them)."""
        return [{**f, "description": f.get("description", "") + self.hint} for f in functions]

    def system(self, functions: list[dict[str, Any]], question_system: Optional[str]) -> str:
        """The prompt-mode system turn of one case (BFCL's `system_prompt_pre_processing_chat_model`)."""
        docs = json.dumps(self.functions_with_hint(functions), indent=4)
        prompt = self.template.replace("{functions}", docs)
        return prompt if question_system is None else f"{prompt}\n\n{question_system}"

    def facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"texts": self.source}
        if self.source == "upstream":
            facts.update(origin=self.origin, sha256=dict(self.sha256), system_prompt_format=self.prompt_format)
        return facts


# toolsweep's own wording of the same instructions (used without BFCL's files).
OWN = PromptTexts(
    source="own",
    template=("You turn a user's request into function calls. You get the request and the functions you may call; "
              "answer with the calls that fulfil it, one or several. If no function fits, or the request does not "
              "give a value a function requires, say so instead of calling.\n\n"
              "Answer with the calls only, as a Python list of calls with keyword arguments: "
              "[function_a(param_1=value_1, param_2=value_2), function_b(param=value)]. Write nothing else.\n\n"
              "The functions, as JSON:\n{functions}\n"),
    hint=" (Written for Python 3.)")


def locate(path: Path) -> Optional[tuple[str, Any]]:
    """Where BFCL's two files are under `path`: ("zip", wheel) or ("dir", the folder holding
    `bfcl_eval/`); None when they are not there."""
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as wheel:
            names = set(wheel.namelist())
        return ("zip", path) if {PROMPTS_FILE, UTILS_FILE} <= names else None
    for root in (path, path / "berkeley-function-call-leaderboard", path.parent, path.parent.parent):
        if (root / PROMPTS_FILE).is_file() and (root / UTILS_FILE).is_file():
            return "dir", root
    return None


def _read(where: tuple[str, Any], name: str) -> str:
    kind, root = where
    try:
        if kind == "zip":
            with zipfile.ZipFile(root) as wheel:
                return wheel.read(name).decode("utf-8")
        return (root / name).read_text(encoding="utf-8")
    except (OSError, KeyError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read {name} from {root} ({exc}); point dataset.bfcl_eval at an unmodified "
                           "copy of BFCL's code, or set dataset.prompts=own") from None


def resolve(mode: str, bfcl_eval: Optional[str], data_path: str) -> PromptTexts:
    """The texts `dataset.prompts=mode` asks for: BFCL's from `dataset.bfcl_eval` (or, unset, from
    a bfcl_eval folder holding dataset.path), else toolsweep's own."""
    if mode not in MODES:
        raise DatasetError(f"dataset.prompts must be one of {list(MODES)}, got {mode!r}")
    if mode == "own":
        return OWN
    candidates = [Path(bfcl_eval).expanduser()] if bfcl_eval else [Path(data_path).expanduser()]
    where = next((w for w in map(locate, candidates) if w is not None), None)
    if where is None:
        if mode == "upstream" or bfcl_eval:
            raise DatasetError(f"BFCL's {PROMPTS_FILE} and {UTILS_FILE} are not under "
                               f"{bfcl_eval or data_path}: point dataset.bfcl_eval at a gorilla checkout, its "
                               "bfcl_eval folder or the bfcl_eval wheel file, or set dataset.prompts=own")
        return OWN
    return read(where)


def read(where: tuple[str, Any]) -> PromptTexts:
    """BFCL's default prompt-mode texts from its two files."""
    prompts_source, utils_source = _read(where, PROMPTS_FILE), _read(where, UTILS_FILE)
    origin = f"{where[1]}" + ("" if where[0] == "dir" else " (wheel)")
    constants = _constants(prompts_source, PROMPTS_FILE)
    missing = [name for name in _NEEDED if name not in constants]
    if missing:
        raise DatasetError(f"{origin}: {PROMPTS_FILE} lacks {missing}; restore it from BFCL, or set dataset.prompts=own")
    hint = _python_hint(utils_source)
    if hint is None:
        raise DatasetError(f"{origin}: {UTILS_FILE} has no string-returning {_HINT_FUNCTION}; restore it from BFCL, "
                           "or set dataset.prompts=own")
    fmt = constants["DEFAULT_SYSTEM_PROMPT_FORMAT"]
    template = compose(constants, fmt)
    sha = {name: hashlib.sha256(text.encode("utf-8")).hexdigest()
           for name, text in ((PROMPTS_FILE, prompts_source), (UTILS_FILE, utils_source))}
    held_out = constants.get(_HELD_OUT)
    held_out = held_out if isinstance(held_out, str) and "{functions}" in held_out else None
    return PromptTexts("upstream", template, hint, origin, sha, fmt, held_out)


def parse_format(fmt: str) -> dict[str, str]:
    """`ret_fmt=python&tool_call_tag=False&...` -> its five settings."""
    parts = dict(item.partition("=")[::2] for item in fmt.split("&"))
    if list(parts) != list(_FORMAT_KEYS):
        raise DatasetError(f"BFCL's DEFAULT_SYSTEM_PROMPT_FORMAT {fmt!r} does not have the settings {list(_FORMAT_KEYS)}; "
                           "set dataset.prompts=own")
    return parts


def compose(constants: dict[str, Any], fmt: str) -> str:
    """BFCL's `formulate_system_prompt` for the format string, functions left as `{functions}`."""
    settings = parse_format(fmt)
    if settings["ret_fmt"] != "python" or settings["func_doc_fmt"] != "json":
        raise DatasetError(f"BFCL's default prompt format {fmt!r} is not Python calls with JSON function docs, which "
                           "toolsweep reads and shows; set dataset.prompts=own")
    try:
        style = constants["PROMPT_STYLE_TEMPLATES"][settings["style"]]
        call_key = "tool_call_with_tag" if settings["tool_call_tag"] == "True" else "tool_call_no_tag"
        call_format = style[call_key].format(output_format=constants["OUTPUT_FORMAT_MAPPING"][settings["ret_fmt"]],
                                             param_types=constants["PARAM_TYPE_MAPPING"][settings["ret_fmt"]])
        marker = "\x00functions\x00"  # the docs are JSON, whose braces str.format must not see
        tools = style["available_tools"].format(format=settings["func_doc_fmt"], functions=marker)
        prompt = constants["PROMPT_TEMPLATE_MAPPING"][settings["prompt_fmt"]].format(
            persona=style["persona"], task=style["task"], tool_call_format=call_format,
            multiturn_behavior=style["multiturn_behavior"], available_tools=tools)
    except (KeyError, IndexError, AttributeError, ValueError) as exc:
        raise DatasetError(f"BFCL's prompt constants do not fill its format {fmt!r} ({type(exc).__name__}: {exc}); "
                           "set dataset.prompts=own") from None
    if settings["tool_call_tag"] == "True":
        raise DatasetError("BFCL's default prompt format asks for <TOOLCALL> tags, which toolsweep does not read; "
                           "set dataset.prompts=own")
    return prompt.replace(marker, "{functions}")


def _constants(source: str, name: str) -> dict[str, Any]:
    try:
        return literal_constants(source, name)
    except SyntaxError as exc:
        raise DatasetError(f"{name} is not valid Python ({exc.msg}, line {exc.lineno}); set dataset.prompts=own") from None


def _python_hint(source: str) -> Optional[str]:
    """The last string constant `_get_language_specific_hint` returns (the `else`: Python's hint)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    function = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == _HINT_FUNCTION), None)
    returns = sorted(((n.lineno, n.col_offset), n.value.value) for n in ast.walk(function) if isinstance(n, ast.Return)
                     and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)) if function else []
    return returns[-1][1] if returns else None
