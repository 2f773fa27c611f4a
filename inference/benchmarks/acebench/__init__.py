"""ACEBench (Chen et al., 2025), English `normal_preference`: one API call whose arguments come
from the user's words and a character profile, scored by ACEBench's own normal checker.

`dataset.path` is an ACEBench checkout, or any folder holding its `data_all/data_en/` files
(`data_normal_preference.json` and `possible_answer/data_normal_preference.json`, one JSON object
per line, paired line by line as ACEBench pairs them). The prompt is ACEBench's (texts.py), the
answer `[ApiName(key='value')]` (grammar.py constrains it), read and checked as ACEBench's
evaluation does (grading/scorers/acebench.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import polars as pl

from grading.scorers.acebench.checker import PY_TYPES
from inference.benchmarks.base import NATIVE_FORMAT, Benchmark, raise_problems, read_jsonl, sample_row, sample_table
from inference.config import DatasetConfig
from inference.errors import DatasetError
from . import texts
from .grammar import gold_answer

SETTINGS = ("normal_preference",)
SCORER = "acebench"
_ID = re.compile(r"^(?P<setting>[a-z_]+)_(?P<number>\d+)$")
_REPEAT_SUFFIX = re.compile(r"_\d+$")


@dataclass
class AceBenchOptions(DatasetConfig):
    """ACEBench's `dataset.*` options."""

    settings: list[str] = field(default_factory=lambda: list(SETTINGS))
    prompts: str = "auto"
    """Whose prompt texts: upstream (ACEBench's model_inference/prompt_en.py, read from dataset.repo),
    own (toolsweep's wording), auto (upstream's where the file is there; a notice says which)."""
    repo: Optional[str] = None
    """The ACEBench checkout whose model_inference/prompt_en.py holds the texts; None: dataset.path."""

    def problems(self) -> list[str]:
        if self.prompts not in texts.MODES:
            return [f"dataset.prompts must be one of {list(texts.MODES)}, got {self.prompts!r}"]
        return []


def data_folder(path: Path) -> Path:
    """The folder holding the English data files: `data_all/data_en` under an ACEBench checkout,
    `data_en` under `data_all`, or the folder itself."""
    for folder in (path / "data_all" / "data_en", path / "data_en", path):
        if (folder / "possible_answer").is_dir():
            return folder
    raise DatasetError(f"dataset.path {str(path)!r} holds no ACEBench English data; point it at an ACEBench "
                       "checkout (or a folder) with data_all/data_en/data_normal_preference.json and "
                       "data_all/data_en/possible_answer/data_normal_preference.json")


def prompt_root(options: AceBenchOptions) -> Path:
    """The ACEBench checkout the prompt texts are read from."""
    return Path(options.repo or options.path).expanduser()


def read_cases(path: Path, setting: str) -> list[tuple[dict[str, Any], Any]]:
    """(question record, answer record) pairs of one category, line by line."""
    folder = data_folder(path)
    questions = read_jsonl(folder / f"data_{setting}.json")
    answers = read_jsonl(folder / "possible_answer" / f"data_{setting}.json")
    if len(questions) != len(answers):
        raise DatasetError(f"{folder}: data_{setting}.json has {len(questions)} records and its possible_answer "
                           f"file {len(answers)}; ACEBench pairs them line by line, so they must match")
    return list(zip(questions, answers))


def case_problems(question: Any, answer: Any, setting: str) -> list[str]:
    """Everything wrong with one pair (empty when it is usable)."""
    if not isinstance(question, dict) or not isinstance(answer, dict):
        return ["a record is not a JSON object"]
    ident = question.get("id")
    match = _ID.match(ident) if isinstance(ident, str) else None
    if not match or match["setting"] != setting:
        return [f"id must look like '{setting}_<number>', got {ident!r}"]
    if answer.get("id") != ident:
        return [f"the possible answer on the same line has id {answer.get('id')!r}"]
    if not all(isinstance(question.get(k), str) for k in ("question", "profile")):
        return ["question and profile must be strings"]
    functions = question.get("function")
    if not isinstance(functions, list) or not functions:
        return ["function must be a non-empty list of API descriptions"]
    problems = [p for f in functions for p in function_problems(f)]
    return problems or truth_problems(answer.get("ground_truth"), functions)


def function_problems(function: Any) -> list[str]:
    """What in an API description ACEBench's checker could not handle."""
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return ["an API description lacks a string name"]
    parameters = function.get("parameters")
    if parameters == {}:
        return []
    if not isinstance(parameters, dict) or not isinstance(parameters.get("properties"), dict) \
            or not isinstance(parameters.get("required"), list):
        return [f"API {function['name']!r}: parameters must hold `properties` and `required`"]
    unknown = sorted({str(s.get("type")) for s in parameters["properties"].values()
                      if not isinstance(s, dict) or s.get("type") not in PY_TYPES})
    return [f"API {function['name']!r}: parameter types {unknown} are not in ACEBench's type table "
            f"{sorted(PY_TYPES)}"] if unknown else []


def truth_problems(truth: Any, functions: list[dict[str, Any]]) -> list[str]:
    """Ground truths ACEBench's checker would crash on."""
    alternatives = truth if isinstance(truth, list) else [truth]
    if not alternatives or not all(isinstance(a, dict) and a and all(isinstance(p, dict) for p in a.values())
                                   for a in alternatives):
        return ["ground_truth must be {ApiName: {param: value}} or a non-empty list of such alternatives"]
    names = [f["name"] for f in functions]
    # the checker finds a gold call's description as the first API whose name is a substring of its key
    lost = [key for a in alternatives for key in a if not any(n in key for n in names)]
    return [f"ground truth calls {lost} match no API of the case"] if lost else []


def schema_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The APIs in toolsweep's schema form (for the native format's call schema)."""
    tools = []
    for function in functions:
        parameters = function.get("parameters") or {}
        required = set(parameters.get("required") or [])
        params = [{"name": n, "type": s.get("type"), "description": s.get("description")}
                  for n, s in (parameters.get("properties") or {}).items()]
        tools.append({"tool_name": function["name"], "tool_description": function.get("description", ""),
                      "required_parameters": [p for p in params if p["name"] in required],
                      "optional_parameters": [p for p in params if p["name"] not in required]})
    return tools


def _row(question: dict[str, Any], answer: dict[str, Any], setting: str) -> dict[str, Any]:
    truth = answer["ground_truth"]
    first = truth[0] if isinstance(truth, list) else truth
    key, params = next(iter(first.items()))
    functions = question["function"]
    system, user = texts.OWN.render(question["profile"], functions, question["question"])
    return sample_row(setting=setting, entry_id=int(_ID.match(question["id"])["number"]), system=system, user=user,
                      native_system=texts.NATIVE_SYSTEM.format(profile=question["profile"]),
                      tools=schema_tools(functions),
                      tool_specs=[{"type": "function", "function": f} for f in functions],
                      gold_tool=_REPEAT_SUFFIX.sub("", key), gold_params=params, scorer=SCORER,
                      inputs={"functions": functions, "ground_truth": truth})


def load_acebench(path: Path, settings: tuple[str, ...], limit: int | None = None) -> pl.DataFrame:
    """The sample table for `settings` (own prompt texts: the solver puts in the chosen ones)."""
    rows, problems = [], []
    for setting in settings:
        for line, (question, answer) in enumerate(read_cases(path, setting), start=1):
            found = case_problems(question, answer, setting)
            problems += [f"data_{setting}.json: line {line}: {p}" for p in found]
            if not found:
                rows.append(_row(question, answer, setting))
    raise_problems(problems, path)
    return sample_table(rows, settings, limit, SCORER)


def _gold_answer(row: dict[str, Any], fmt: str, parser: str) -> str | None:
    """ACEBench's `[ApiName(key='value')]` in its own format; None (the one gold call) in the native one."""
    return None if fmt == NATIVE_FORMAT else gold_answer(json.loads(row["ground_truth"]))


def _check(cfg: Any) -> list[str]:
    options: AceBenchOptions = cfg.dataset
    found = []
    if options.prompts == "upstream" and not (prompt_root(options) / texts.PROMPT_FILE).is_file():
        found.append(f"dataset.prompts=upstream needs {texts.PROMPT_FILE} under {prompt_root(options)}; point "
                     "dataset.repo at an ACEBench checkout, or set dataset.prompts=own")
    native = (cfg.prompt.format or "benchmark") == "native"
    if cfg.engine.sends_chat and cfg.decoding.constraint != "none" and not native:
        found.append(f"decoding.constraint={cfg.decoding.constraint} with engine={cfg.engine.name}: ACEBench's answer "
                     "grammar is a regex, which a chat-completions server cannot apply; set decoding.constraint=none")
    return found


BENCHMARK = Benchmark(name="acebench", settings=SETTINGS, load=load_acebench, scorer=SCORER,
                      solvers=("inference.benchmarks.acebench.solver",), options=AceBenchOptions, check=_check,
                      gold=_gold_answer,
                      path_hint="an ACEBench checkout, or a folder with data_all/data_en/data_normal_preference.json "
                                "and its possible_answer file")
