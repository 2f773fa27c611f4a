"""Upstream ETAPP's own texts, read at run time from the user's ETAPP copy (`dataset.prompts`).

Upstream keeps its prompts as Python modules of string constants beside its data
(`Inference/prompts/generation_prompt.py`, `generation_retrieval_prompt.py`,
`evaluation/evaluate_prompt.py`). toolsweep ships none of those sentences (upstream has no
license); it reads them from the folder `dataset.path` names, as it reads the data. The files are
parsed with `ast` and never imported or executed: only top-level assignments of literals are taken
(`inference.python_source.literal_constants`: the strings, and the method tables, `PROMPT_DICT`, a
dict of tuples of constant names, with the names resolved).

Two of upstream's loop files hold a few texts inline (the agent's reminders; the hints inside the
judge's answer skeleton). Where the user's copy has them they are read by the fixed rules of
`_loop_reminders` and `_skeleton_hints`; where it does not, the project's own wording stands in
and run.json says which.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from grading.scorers.etapp_judge.upstream import PERSONAL_MARK, PROACTIVE_MARK
from inference.errors import ConfigError, DatasetError
from inference.python_source import literal_constants, literal_value

AGENT = "Inference/prompts/generation_prompt.py"
RETRIEVAL = "Inference/prompts/generation_retrieval_prompt.py"
JUDGE = "evaluation/evaluate_prompt.py"
PROMPT_FILES = (AGENT, RETRIEVAL, JUDGE)
LOOP = "Inference/evaluate_prompted_agent.py"
EVALUATOR = "evaluation/evaluate.py"
MODES = ("auto", "upstream", "own")

METHOD_KEYS = {"fc": "fine-tuned", "react": "react", "e_react": "e-react"}
"""toolsweep's method -> upstream's key in its PROMPT_DICT tables (`--method`)."""
TABLES = {AGENT: "PROMPT_DICT", RETRIEVAL: "RETRIEVAL_PROMPT_DICT"}
ONESHOT = {AGENT: "REACT_ONESHOT_EXAMPLE", RETRIEVAL: "RETRIEVAL_REACT_ONESHOT_EXAMPLE"}
EXEC = "EXEC_PROMPT"
JUDGE_TEMPLATE = "EVALUATE_PERSONALIZATION_AND_PROACTIVITY"


@dataclass(frozen=True)
class Reminders:
    """The user (and FC tool) turns the loop sends after a malformed step."""

    no_action: str
    """ReAct / E-ReAct: the text named no action and gave no final answer."""
    bad_input_react: str
    """ReAct: the Action Input is not a Python dict literal."""
    bad_input_e_react: str
    """E-ReAct's version of it (upstream's lacks the one-tool sentence)."""
    fc_format: str
    """FC: a tool-call block that cannot be read."""
    fc_bad_arguments: str
    """FC: the tool-role answer to one call whose arguments give no dict."""


@dataclass(frozen=True)
class SkeletonHints:
    """The placeholder values upstream's judge skeleton shows (`evaluation/evaluate.py`)."""

    procedure: dict[str, Any]
    """The whole `output_format` dict, `personal` / `proactive` left as grading.scorers.etapp_judge.upstream's marks."""
    personal: dict[str, str]
    """One personalization key point's slot ({"analysis": hint, "score": hint})."""
    proactive: dict[str, str]



@dataclass(frozen=True)
class UpstreamFiles:
    """Every text read from the user's copy, and the SHA-256 of every file read."""

    root: Path
    agent: dict[str, Any]
    retrieval: dict[str, Any]
    judge: dict[str, Any]
    reminders: Optional[Reminders] = None
    hints: Optional[SkeletonHints] = None
    sha256: dict[str, str] = field(default_factory=dict)

    def system_and_user(self, method: str, retrieval: bool) -> tuple[str, str]:
        """Upstream's (system template, user template) of a method in a setting."""
        source = RETRIEVAL if retrieval else AGENT
        table = (self.retrieval if retrieval else self.agent)[TABLES[source]]
        key = METHOD_KEYS[method]
        if key not in table:
            raise DatasetError(f"{self.root / source}: {TABLES[source]} has no entry {key!r} (it has {sorted(table)}); "
                               "point dataset.path at an unmodified ETAPP copy, or set dataset.prompts=own")
        system, user = table[key]
        return system, user

    def oneshot(self, retrieval: bool) -> str:
        return (self.retrieval if retrieval else self.agent)[ONESHOT[RETRIEVAL if retrieval else AGENT]]

    @property
    def exec_prompt(self) -> str:
        """E-ReAct's execution text. Upstream star-imports the retrieval module after the tool-given
        one, so the retrieval file's EXEC_PROMPT is the one both settings use."""
        return self.retrieval.get(EXEC) or self.agent[EXEC]

    @property
    def judge_template(self) -> str:
        return self.judge[JUDGE_TEMPLATE]

    @property
    def judge_hints(self) -> Optional[tuple[dict[str, Any], dict[str, str], dict[str, str]]]:
        """(skeleton layout with the key-point marks, a personal slot, a proactive slot), or None."""
        return (self.hints.procedure, self.hints.personal, self.hints.proactive) if self.hints else None

    def facts(self) -> dict[str, Any]:
        """What run.json records: which texts, and the hash of every file read."""
        return {"texts": "upstream", "root": str(self.root), "sha256": dict(self.sha256),
                "reminders": "upstream" if self.reminders else "own (no " + LOOP + ")",
                "judge_skeleton_hints": "upstream" if self.hints else "own (no " + EVALUATOR + ")"}


REQUIRED = {AGENT: (TABLES[AGENT], ONESHOT[AGENT], EXEC), RETRIEVAL: (TABLES[RETRIEVAL], ONESHOT[RETRIEVAL]),
            JUDGE: (JUDGE_TEMPLATE,)}


def present(root: Path) -> bool:
    """Whether the three prompt files are under the ETAPP folder."""
    return all((root / name).is_file() for name in PROMPT_FILES)


def resolve(mode: str, root: Path) -> Optional[UpstreamFiles]:
    """Upstream's texts (None: the project's own) for `dataset.prompts=mode`."""
    if mode not in MODES:
        raise ConfigError(f"dataset.prompts must be one of {list(MODES)}, got {mode!r}")
    if mode == "own" or (mode == "auto" and not present(root)):
        return None
    missing = [name for name in PROMPT_FILES if not (root / name).is_file()]
    if missing:
        raise DatasetError(f"dataset.prompts=upstream needs upstream's prompt files under {root}, missing {missing}; "
                           "point dataset.path at a clone of hypasd-art/ETAPP, or set dataset.prompts=own")
    return read(root)


def read(root: Path) -> UpstreamFiles:
    """Parse the three prompt files (and the two loop files where present)."""
    sha = {}
    texts = {}
    for name in PROMPT_FILES:
        source = _source(root / name)
        sha[name] = hashlib.sha256(source.encode("utf-8")).hexdigest()
        texts[name] = _constants(root / name, source)
        for constant in REQUIRED[name]:
            if constant not in texts[name]:
                raise DatasetError(f"{root / name} lacks the constant {constant} that the run needs; restore the "
                                   "file from upstream, or set dataset.prompts=own")
    reminders = hints = None
    if (root / LOOP).is_file():
        source = _source(root / LOOP)
        sha[LOOP] = hashlib.sha256(source.encode("utf-8")).hexdigest()
        reminders = _loop_reminders(source)
    if (root / EVALUATOR).is_file():
        source = _source(root / EVALUATOR)
        sha[EVALUATOR] = hashlib.sha256(source.encode("utf-8")).hexdigest()
        hints = _skeleton_hints(source)
    return UpstreamFiles(root, texts[AGENT], texts[RETRIEVAL], texts[JUDGE], reminders, hints, sha)


def _source(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read {path} ({exc}); restore it from upstream or set dataset.prompts=own") from None


def _constants(path: Path, source: str) -> dict[str, Any]:
    """The file's top-level literal constants (`NAME = "..."`, `NAME = {"key": (CONST, CONST), ...}`
    with the names resolved); later assignments win, as they would on import."""
    try:
        return literal_constants(source, str(path))
    except SyntaxError as exc:
        raise DatasetError(f"{path} is not valid Python ({exc.msg}, line {exc.lineno}); restore it from upstream "
                           "or set dataset.prompts=own") from None


# --- Texts upstream keeps inline in its loop code -------------------------------------------------

def _role_texts(node: ast.AST) -> list[tuple[str, str]]:
    """(role, content) of every `{"role": <str>, "content": <str>}` literal under `node`, in source
    order, each once (upstream writes each twice: to the model and to the record)."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Dict):
            items = {k.value: v for k, v in zip(sub.keys, sub.values) if isinstance(k, ast.Constant)}
            role, content = items.get("role"), items.get("content")
            if (isinstance(role, ast.Constant) and isinstance(content, ast.Constant)
                    and isinstance(content.value, str)):
                found.append(((sub.lineno, sub.col_offset), (role.value, content.value)))
    return list(dict.fromkeys(text for _, text in sorted(found)))


def _method_branches(tree: ast.Module) -> dict[str, ast.If]:
    """`method == '<key>'` -> its branch, in upstream's `method_converter`."""
    function = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "method_converter"), None)
    branches: dict[str, ast.If] = {}
    for node in ast.walk(function) if function else ():
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "method"
                and isinstance(test.comparators[0], ast.Constant)):
            branches.setdefault(test.comparators[0].value, ast.Module(body=node.body, type_ignores=[]))
    return branches


def _loop_reminders(source: str) -> Optional[Reminders]:
    """The reminders by their place in upstream's `method_converter`: in the react and e-react
    branches the first user text is the no-action reminder and the second the format reminder; in
    the fine-tuned branch the first user text is the call-format reminder and the first tool text
    the bad-arguments answer. None when the file does not have that shape."""
    try:
        branches = _method_branches(ast.parse(source))
        react, e_react = (_texts(branches[k], "user") for k in ("react", "e-react"))
        fc = branches["fine-tuned"]
        return Reminders(react[0], react[1], e_react[1], _texts(fc, "user")[0], _texts(fc, "tool")[0])
    except (SyntaxError, KeyError, IndexError):
        return None


def _texts(branch: ast.AST, role: str) -> list[str]:
    return [content for r, content in _role_texts(branch) if r == role]


def _skeleton_hints(source: str) -> Optional[SkeletonHints]:
    """The judge skeleton of upstream's `evaluate_personalization_and_proactivity`: the dict
    literal assigned to `output_format` (its `personal` and `proactive` names kept as markers) and
    the dict literals assigned to `personal[...]` and `proactive[...]`. None when absent."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    function = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                     and n.name == "evaluate_personalization_and_proactivity"), None)
    slots: dict[str, Any] = {}
    for node in ast.walk(function) if function else ():
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Dict):
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id == "output_format":
                slots["format"] = node.value
            elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                slots.setdefault(target.value.id, node.value)
    try:
        marks = {"personal": PERSONAL_MARK, "proactive": PROACTIVE_MARK}
        return SkeletonHints(literal_value(slots["format"], marks), literal_value(slots["personal"], {}),
                             literal_value(slots["proactive"], {}))
    except (KeyError, ValueError):
        return None
