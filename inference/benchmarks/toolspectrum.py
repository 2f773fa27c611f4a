"""ToolSpectrum adapter: the user's profile and environment decide the arguments, or a refusal.

`dataset.path` is a folder with `data/dataset_{persona,environment,persona_environment}.json`
(cases: `instruction`, `persona` and/or `environment`, gold `toolCall` = `{APP, API, params}`
or null for "refuse") and `api/API_description{_persona,_environment,}.json` (the toolset of
each setting: `{APP: {desc, policy?, APIs: {API: {desc, required_arguments,
personalized_arguments, environmental_arguments}}}}`, argument keys `"name (type)"`).

Every case is shown the whole API file of its setting. A tool is named `APP.API` (API names
repeat across apps). Refusal is allowed, in the prompt and the grammar, in the setting whose
gold has refusals (persona_environment). The benchmark publishes no scoring code; toolsweep
reconstructs its paper's Table 3 F1 levels (grading/scorers/toolspectrum_f1.py) from the
`toolset` column: every APP.API with its app, API name and argument groups.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from inference.benchmarks.base import Benchmark, raise_problems, read_json, sample_row, sample_table
from inference.errors import DatasetError

# setting -> (cases file, API file, context fields shown, refusal allowed)
SETTINGS: dict[str, tuple[str, str, tuple[str, ...], bool]] = {
    "persona": ("dataset_persona.json", "API_description_persona.json", ("persona",), False),
    "environment": ("dataset_environment.json", "API_description_environment.json", ("environment",), False),
    "persona_environment": ("dataset_persona_environment.json", "API_description.json",
                            ("persona", "environment"), True),
}
SCORER = "toolspectrum_f1"
GROUPS = {"required_arguments": "required", "personalized_arguments": "personalized",
          "environmental_arguments": "environmental"}
_ARG_KEY = re.compile(r"^\s*(?P<name>[^()]+?)\s*\((?P<type>[^()]*)\)\s*$")
_VALUES = re.compile(r"Available values:\s*(?P<values>\[.*?\])")
_CONTEXT_TITLES = {"persona": "The user's profile", "environment": "The user's current environment"}

_INSTRUCTIONS = (
    "You operate a phone's apps for one user. Pick the API that fulfils the user's instruction "
    "and fill in its arguments: required ones from the instruction, personalized ones from the "
    "user's profile, environmental ones from the user's current environment.\n\n"
    "{toolset}\n\n{context}\n\n"
    "Call exactly one API. Answer with only a JSON object: "
    '{{"tool_name": "<APP>.<API>", "parameters": {{"<argument>": <value>, ...}}}}{refusal}')
_REFUSAL = (
    "\nIf the instruction violates an app's policy or does not suit the user's profile or "
    'environment, call nothing and answer {"tool_name": null, "parameters": null}.')
# Native format: the tools go to the chat template; the app descriptions and policies stay here.
_NATIVE_INSTRUCTIONS = (
    "You operate a phone's apps for one user. Call the API that fulfils the user's instruction: "
    "required arguments from the instruction, personalized ones from the user's profile, "
    "environmental ones from the user's current environment.\n\n{apps}\n\n{context}{refusal}")
_NATIVE_REFUSAL = ("\nIf the instruction violates an app's policy or does not suit the user's profile or "
                   "environment, call no tool and say why.")


def argument(key: str) -> tuple[str, str]:
    """`"mediaQuality (str)"` -> ("mediaQuality", "str"); a key without a type has type ""."""
    match = _ARG_KEY.match(key)
    return (match["name"], match["type"].strip()) if match else (key.strip(), "")


def toolset_problems(api: Any) -> list[str]:
    """Everything wrong with an API file's shape (empty when usable)."""
    if not isinstance(api, dict):
        return [f"the API file must be an object of apps, got {type(api).__name__}"]
    return [f"app {app!r} must have an object of APIs under 'APIs'" for app, spec in api.items()
            if not isinstance(spec, dict) or not isinstance(spec.get("APIs"), dict)]


def allowed_values(description: str, arg_type: str) -> list[Any] | None:
    """The argument's `Available values: [...]` as a list, where they are categorical (strings or
    booleans; a numeric list such as `[0, 100]` is an example range, not a choice).

    Booleans also admit the strings "True"/"False", the form most of the gold uses.
    """
    match = _VALUES.search(description)
    if not match:
        return None
    try:
        values = ast.literal_eval(match["values"])
    except (ValueError, SyntaxError):  # unquoted: [low, high]
        values = [v.strip().strip("'\"") for v in match["values"].strip("[]").split(",") if v.strip()]
    if not isinstance(values, list) or not values or not all(isinstance(v, (str, bool)) for v in values):
        return None
    if arg_type == "bool" and set(values) == {True, False}:
        return [True, False, "True", "False"]
    return list(dict.fromkeys(values))


def schema_tools(api: dict[str, Any]) -> list[dict[str, Any]]:
    """Every APP.API as a tool in the schema form: required arguments required, the rest
    optional, personalized and environmental arguments limited to their available values."""
    tools = []
    for app, spec in api.items():
        for name, fn in spec["APIs"].items():
            params = {g: [_parameter(k, d, g != "required_arguments") for k, d in (fn.get(g) or {}).items()]
                      for g in GROUPS}
            tools.append({"tool_name": f"{app}.{name}",
                          "required_parameters": params["required_arguments"],
                          "optional_parameters": params["personalized_arguments"]
                          + params["environmental_arguments"]})
    return tools


def _parameter(key: str, description: Any, categorical: bool) -> dict[str, Any]:
    # Required arguments come from the instruction, and their value lists are examples: the
    # gold buys 'Books' from a category listed as [Clothing, Electronics, ...]. Personalized
    # and environmental arguments are choices, and the gold keeps to their lists.
    name, arg_type = argument(key)
    allowed = allowed_values(description, arg_type) if categorical and isinstance(description, str) else None
    return {"name": name, "type": arg_type, **({"enum": allowed} if allowed else {})}


def toolset_table(api: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{APP.API: {"app", "api", "groups": {argument: group}}}: what the F1 scorer needs."""
    groups = argument_groups(api)
    return {f"{app}.{name}": {"app": app, "api": name, "groups": groups[f"{app}.{name}"]}
            for app, spec in api.items() for name in spec["APIs"]}


def app_notes(api: dict[str, Any]) -> str:
    """Each app's description and policies, for the native format's system turn."""
    return "\n".join(f"# {app}: {spec.get('desc', '')}" + "".join(f"\nPolicy: {p}" for p in _policies(spec))
                     for app, spec in api.items())


def argument_groups(api: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{APP.API: {argument name: required | personalized | environmental}}."""
    return {f"{app}.{name}": {argument(k)[0]: group for g, group in GROUPS.items() for k in fn.get(g) or {}}
            for app, spec in api.items() for name, fn in spec["APIs"].items()}


def render_toolset(api: dict[str, Any]) -> str:
    """The whole API file, every description and policy kept, in a compact text layout.

    The file as JSON is 7-14k tokens, over a small model's context; most of that is one
    set of environmental arguments repeated under every API, which is written once here.
    """
    shared = _shared_environment(api)
    lines = ["Apps and APIs. Arguments are written `name (type): description`."]
    if shared:
        lines.append("Environmental arguments (every API marked [env] accepts all of them):")
        lines += [f"  {k}: {v}" for k, v in shared.items()]
    for app, spec in api.items():
        lines.append(f"\n# {app}: {spec.get('desc', '')}")
        lines += [f"Policy: {p}" for p in _policies(spec)]
        for name, fn in spec["APIs"].items():
            env = fn.get("environmental_arguments") or {}
            lines.append(f"- {app}.{name}: {fn.get('desc', '')}" + (" [env]" if shared and env == shared else ""))
            for group in GROUPS:
                args = fn.get(group) or {}
                if args and not (group == "environmental_arguments" and args == shared):
                    lines.append(f"  {GROUPS[group]}: " + "; ".join(f"{k}: {v}" for k, v in args.items()))
    return "\n".join(lines)


def _policies(spec: dict[str, Any]) -> list[str]:
    policy = spec.get("policy") or []
    return [policy] if isinstance(policy, str) else [str(p) for p in policy]


def _shared_environment(api: dict[str, Any]) -> dict[str, str]:
    sets = Counter(json.dumps(fn.get("environmental_arguments") or {}, sort_keys=True)
                   for spec in api.values() for fn in spec["APIs"].values())
    common, count = sets.most_common(1)[0] if sets else ("{}", 0)
    return json.loads(common) if count > 1 else {}


def case_problems(case: Any, fields: tuple[str, ...], groups: dict[str, dict[str, str]]) -> list[str]:
    """Everything wrong with one case (empty when it is usable)."""
    if not isinstance(case, dict):
        return [f"case is a {type(case).__name__}, not an object"]
    missing = [f for f in ("instruction", *fields) if not case.get(f)]
    if missing:
        return [f"missing or empty fields {missing}"]
    if "toolCall" not in case:
        return ["missing field 'toolCall' (null means the right answer is to refuse)"]
    call = case["toolCall"]
    if call is None:
        return []
    if not isinstance(call, dict) or not all(isinstance(call.get(k), str) for k in ("APP", "API")) \
            or not isinstance(call.get("params"), dict):
        return ['toolCall must be {"APP": str, "API": str, "params": {...}} or null']
    if f"{call['APP']}.{call['API']}" not in groups:
        return [f"gold API {call['APP']}.{call['API']} is not in the setting's API file"]
    return []


def _context(case: dict[str, Any], fields: tuple[str, ...]) -> str:
    return "\n".join(f"{_CONTEXT_TITLES[f]}: {json.dumps(case[f], ensure_ascii=False)}" for f in fields)


def _setting_rows(root: Path, setting: str) -> tuple[list[dict[str, Any]], list[str]]:
    cases_file, api_file, fields, refusal = SETTINGS[setting]
    api = read_json(root / "api" / api_file)
    shape = toolset_problems(api)
    if shape:
        raise DatasetError(f"{root / 'api' / api_file}: " + "; ".join(shape))
    cases = read_json(root / "data" / cases_file)
    if not isinstance(cases, list):
        raise DatasetError(f"{root / 'data' / cases_file}: expected a JSON array of cases, got {type(cases).__name__}.")
    tools, groups, toolset = schema_tools(api), argument_groups(api), render_toolset(api)
    table, notes = json.dumps(toolset_table(api), ensure_ascii=False), app_notes(api)
    rows, problems = [], []
    for index, case in enumerate(cases):
        found = case_problems(case, fields, groups)
        problems += [f"{cases_file}: case {index}: {p}" for p in found]
        if found:
            continue
        call = case["toolCall"]
        tool = f"{call['APP']}.{call['API']}" if call else None
        system = _INSTRUCTIONS.format(toolset=toolset, context=_context(case, fields),
                                      refusal=_REFUSAL if refusal else "")
        native = _NATIVE_INSTRUCTIONS.format(apps=notes, context=_context(case, fields),
                                             refusal=_NATIVE_REFUSAL if refusal else "")
        rows.append(sample_row(setting=setting, entry_id=index, system=system, native_system=native,
                               user=case["instruction"], tools=tools, gold_tool=tool,
                               gold_params=call["params"] if call else None, scorer=SCORER,
                               allow_refusal=refusal, inputs={"toolset": table}))
    return rows, problems


def load_toolspectrum(path: Path, settings: tuple[str, ...], limit: int | None = None) -> pl.DataFrame:
    """The sample table for `settings`, the first `limit` cases of each."""
    if not (path / "data").is_dir() or not (path / "api").is_dir():
        raise DatasetError(f"dataset.path {str(path)!r} lacks data/ or api/; point it at the ToolSpectrum "
                           "folder holding data/dataset_*.json and api/API_description*.json")
    rows, problems = [], []
    for setting in settings:
        setting_rows, setting_problems = _setting_rows(path, setting)
        rows += setting_rows
        problems += setting_problems
    raise_problems(problems, path)
    return sample_table(rows, settings, limit, SCORER)


BENCHMARK = Benchmark(name="toolspectrum", settings=tuple(SETTINGS), load=load_toolspectrum, scorer=SCORER,
                  path_hint="the ToolSpectrum folder (data/dataset_*.json, api/API_description*.json)")
