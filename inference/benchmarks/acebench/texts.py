"""The prompt ACEBench's inference sends for preference data, from one of two sources
(`dataset.prompts`):

- `upstream`: ACEBench's own texts, read at run time from the user's ACEBench checkout
  (`model_inference/prompt_en.py`, the constants SYSTEM_PROMPT_FOR_PREFERENCE_DATA_EN and
  USER_PROMPT_EN). The file is parsed with `ast`, never imported or executed, and toolsweep ships
  none of its sentences; the templates are filled as ACEBench's inference fills them
  (`str.format` with the profile string, the function list as Python writes it, the question);
- `own`: toolsweep's wording of the same instructions, for a copy without that file.

`auto` takes upstream's where the file is there; a notice line says which texts ran and run.json
records it, with the file's SHA-256.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from inference.errors import DatasetError
from inference.python_source import literal_constants

PROMPT_FILE = "model_inference/prompt_en.py"
SYSTEM_CONSTANT = "SYSTEM_PROMPT_FOR_PREFERENCE_DATA_EN"
USER_CONSTANT = "USER_PROMPT_EN"
MODES = ("auto", "upstream", "own")

OWN_SYSTEM = (
    "You are the assistant in a conversation with a user whose character profile is given below. From the API "
    "descriptions, the conversation so far (steps 1..t) and the profile, decide which API requests the "
    "assistant makes at step t+1.\n"
    "Write them as one list in the form [ApiName(key1='value1', key2='value2', ...)], with the real API name, "
    "parameter names and values. The answer begins with \"[\" and ends with \"]\"; several requests go in the "
    "same list, separated by commas: [ApiName(key1='value1', ...), OtherApi(key1='value1', ...)]. Write "
    "nothing else: no explanation, no hints, no results of the requests.\n"
    "A parameter is optional unless its description says otherwise: include the ones the user's words or the "
    "profile mention, and leave out the others.\n"
    "Where a parameter's description does not fix the format of its value, take the value from the user's "
    "words or the profile.\n"
    "An API that takes no parameters is requested as [ApiName()]; never make up a parameter name.\n\n"
    "Character profile:\n{profile}\n\n"
    "Roles:\nuser: the user\nassistant: the AI assistant, which makes the API requests\n"
    "tool: returns the results of the requests\n\n"
    "APIs:\n{function}")
OWN_USER = "The conversation, steps 1..t:\n{question}"
NATIVE_SYSTEM = (
    "You are the assistant in a conversation with a user whose character profile is given below. Call the "
    "APIs the assistant should call next, taking parameter values from the user's words or the profile and "
    "leaving out the parameters neither mentions.\n\nCharacter profile:\n{profile}")
"""prompt.format=native (toolsweep's own: ACEBench prompts in its text format only)."""


@dataclass(frozen=True)
class PromptTexts:
    """The system and user templates, and where they came from."""

    source: str
    """upstream or own."""
    system: str
    """Placeholders {profile} and {function}."""
    user: str
    """Placeholder {question}."""
    file: Optional[Path] = None
    sha256: Optional[str] = None

    def render(self, profile: str, functions: list[dict[str, Any]], question: str) -> tuple[str, str]:
        """(system, user) as ACEBench's inference fills them: the function list as Python writes it."""
        return self.system.format(profile=profile, function=functions), self.user.format(question=question)

    def facts(self) -> dict[str, Any]:
        """What run.json records about the texts."""
        return {"texts": self.source, "file": None if self.file is None else str(self.file), "sha256": self.sha256}

    def line(self) -> str:
        """The texts in one line, for the notice and the report."""
        if self.source == "own":
            return f"toolsweep's own wording (no {PROMPT_FILE} read)"
        return f"ACEBench's, read from {self.file} (sha256 {self.sha256[:12]})"


OWN = PromptTexts("own", OWN_SYSTEM, OWN_USER)


def resolve(mode: str, root: Path) -> PromptTexts:
    """The texts `dataset.prompts=mode` asks for, with `root` the ACEBench checkout."""
    if mode not in MODES:
        raise DatasetError(f"dataset.prompts must be one of {list(MODES)}, got {mode!r}")
    path = root / PROMPT_FILE
    if mode == "own" or (mode == "auto" and not path.is_file()):
        return OWN
    if not path.is_file():
        raise DatasetError(f"dataset.prompts=upstream needs ACEBench's {PROMPT_FILE} under {root}; point "
                           "dataset.repo at an ACEBench checkout, or set dataset.prompts=own")
    return read(path)


def read(path: Path) -> PromptTexts:
    """The two templates from ACEBench's prompt file, checked to take the placeholders its
    inference fills."""
    try:
        source = path.read_text(encoding="utf-8")
        constants = literal_constants(source, str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise DatasetError(f"cannot read {path} ({exc}); restore it from ACEBench, or set dataset.prompts=own") from None
    missing = [c for c in (SYSTEM_CONSTANT, USER_CONSTANT) if not isinstance(constants.get(c), str)]
    if missing:
        raise DatasetError(f"{path} lacks the string constants {missing}; restore it from ACEBench, or set "
                           "dataset.prompts=own")
    texts = PromptTexts("upstream", constants[SYSTEM_CONSTANT], constants[USER_CONSTANT], path,
                        hashlib.sha256(source.encode("utf-8")).hexdigest())
    try:
        texts.render("", [], "")
    except (KeyError, IndexError, ValueError) as exc:
        raise DatasetError(f"{path}: a template has a placeholder ACEBench's inference does not fill ({exc!r}); "
                           "it fills {profile}, {function} and {question}. Restore the file, or set "
                           "dataset.prompts=own") from None
    return texts
