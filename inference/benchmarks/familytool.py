"""FamilyTool adapter: multi-hop personal knowledge decides the arguments.

`dataset.path` is a folder with `datasets/familytool-{b,e}.jsonl` (one case per line: a list
of role messages `id`, `candidate_tools`, `user`, `tool_call`) and `KG/familykg-{b,e}.jsonl`
(one `[head, relation, tail]` triple per line). Settings:

- `b`, `e`: the base and extended sets in the released golden-KG form: the query carries
  the triples it needs ("The extra information for the query is (...)").
- `b_retrieve`, `e_retrieve`: the same cases with those triples cut from the query and the
  whole family graph put in the prompt, so the model must find the path itself.

FamilyTool's authors prompt in the model's native tool-call format (the chat template gets
`tools=`, no system message) and read calls with the model family's parser; that is the default
here (`prompt.format=native`). Scoring is UnifiedToolHub's single-round metric
(grading/scorers/unifiedtoolhub.py), against the gold calls as written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from inference.benchmarks.base import NATIVE_FORMAT, Benchmark, raise_problems, read_jsonl, sample_row, sample_table
from inference.errors import DatasetError

SETTINGS = ("b", "e", "b_retrieve", "e_retrieve")
SCORER = "unifiedtoolhub"
_ROLES = ("id", "candidate_tools", "user", "tool_call")
_ID_PREFIX = "KGMTUbench_"
_KG_MARKER = "The extra information for the query is"

_INSTRUCTIONS = (
    "You call tools for the members of one family. The user's message names the speaker; "
    "the right arguments are usually entities of the family's knowledge graph (people, their "
    "relations and their preferences, as (head, relation, tail) triples).\n"
    "Candidate tools (JSON):\n{tools}\n{graph}\n"
    "Call exactly one tool. Answer with only a JSON object: "
    '{{"tool_name": "<tool name>", "parameters": {{"<name>": <value>, ...}}}}')
_GRAPH = "\nThe family knowledge graph, one (head, relation, tail) triple per line:\n{triples}\n"
# Native format: upstream sends no system message; the retrieve settings need the graph somewhere,
# so it goes in a system turn of its own.
_NATIVE_GRAPH = ("You call tools for the members of one family. The right arguments are usually entities of "
                 "the family's knowledge graph.{graph}")


def case_problems(case: Any) -> list[str]:
    """Everything wrong with one case line (empty when it is usable)."""
    if not isinstance(case, list) or [m.get("role") if isinstance(m, dict) else None for m in case] != list(_ROLES):
        return [f"a case must be a list of messages with roles {list(_ROLES)}"]
    ident, tools, user, calls = (m.get("content") for m in case)
    if not isinstance(ident, str) or not ident.startswith(_ID_PREFIX) or not ident[len(_ID_PREFIX):].isdigit():
        return [f"id must look like '{_ID_PREFIX}<number>', got {ident!r}"]
    if not isinstance(tools, list) or not tools or not all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                                           for t in tools):
        return ["candidate_tools must be a non-empty list of tools with a name each"]
    if not isinstance(user, str) or not user.strip():
        return ["user must be a non-empty string"]
    if not isinstance(calls, list) or not calls or not isinstance(calls[0], dict) \
            or not isinstance(calls[0].get("name"), str) or not isinstance(calls[0].get("parameters"), dict):
        return ['tool_call must be a list whose first item is {"name": str, "parameters": {...}}']
    if calls[0]["name"].strip() not in {t["name"].strip() for t in tools}:
        return [f"gold tool {calls[0]['name']!r} is not among the {len(tools)} candidates"]
    return []


def schema_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Candidate tools in the schema form, every parameter optional.

    `required` is not enforced: 200 of the 938 gold calls leave out a parameter their tool
    marks required, and the official scoring checks gold keys only. A `required` name with
    no property definition is still declared, so the model may give it.
    """
    out, seen = [], set()
    for tool in tools:
        if tool["name"] in seen:  # some cases list a tool twice, identically
            continue
        seen.add(tool["name"])
        params = tool.get("parameters") or {}
        properties = params.get("properties") or {}
        if isinstance(properties, list):  # a few tools list properties as [{name, ...}]
            properties = {p.get("name"): p for p in properties if isinstance(p, dict)}
        names = [*properties, *(n for n in params.get("required") or [] if isinstance(n, str))]
        out.append({"tool_name": tool["name"], "required_parameters": [],
                    "optional_parameters": [{"name": n, "type": (properties.get(n) or {}).get("type")}
                                            for n in dict.fromkeys(names) if isinstance(n, str)]})
    return out


def prompt_tools(tools: list[dict[str, Any]]) -> str:
    """The candidate tools as shown to the model: name, description, parameters (no response
    schema: the call does not depend on it), one compact JSON list."""
    shown = {t["name"]: {k: t[k] for k in ("name", "description", "parameters") if k in t} for t in tools}
    return json.dumps(list(shown.values()), ensure_ascii=False, separators=(",", ":"))


def read_graph(path: Path) -> str:
    """The family graph file as `(head, relation, tail)` lines."""
    triples = read_jsonl(path)
    bad = [i for i, t in enumerate(triples, start=1) if not (isinstance(t, list) and len(t) == 3)]
    if bad:
        raise DatasetError(f"{path}: lines {bad[:10]} are not [head, relation, tail] triples.")
    return "\n".join(f"({h}, {r}, {t})" for h, r, t in triples)


def _row(case: list[dict[str, Any]], setting: str, graph: str | None) -> dict[str, Any]:
    ident, tools, user, calls = (m["content"] for m in case)
    if graph is not None:
        user = user.split(_KG_MARKER)[0].rstrip()
    graph_text = _GRAPH.format(triples=graph) if graph is not None else ""
    system = _INSTRUCTIONS.format(tools=prompt_tools(tools), graph=graph_text)
    return sample_row(setting=setting, entry_id=int(ident[len(_ID_PREFIX):]), system=system, user=user,
                      native_system=_NATIVE_GRAPH.format(graph=graph_text) if graph is not None else None,
                      tools=schema_tools(tools), tool_specs=function_specs(tools),
                      gold_tool=calls[0]["name"], gold_params=calls[0]["parameters"], scorer=SCORER,
                      inputs={"gold_calls": [{"name": c["name"], "parameters": c["parameters"]} for c in calls]})


def function_specs(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The candidate tools as chat-template function specs: name, description and the
    parameters object as the benchmark writes it (the response schema is left out)."""
    seen, specs = set(), []
    for tool in tools:
        if tool["name"] not in seen:
            seen.add(tool["name"])
            specs.append({"type": "function", "function": {k: tool[k] for k in ("name", "description", "parameters")
                                                           if k in tool}})
    return specs


def _files(root: Path, part: str) -> tuple[Path, Path]:
    return root / "datasets" / f"familytool-{part}.jsonl", root / "KG" / f"familykg-{part}.jsonl"


def load_familytool(path: Path, settings: tuple[str, ...], limit: int | None = None) -> pl.DataFrame:
    """The sample table for `settings` (each of b/e read once, whatever settings use it)."""
    if not (path / "datasets").is_dir():
        raise DatasetError(f"dataset.path {str(path)!r} has no datasets/ folder; point it at the FamilyTool "
                           "folder holding datasets/familytool-{b,e}.jsonl and KG/familykg-{b,e}.jsonl")
    rows, problems = [], []
    for part in ("b", "e"):
        wanted = [s for s in settings if s.split("_")[0] == part]
        if not wanted:
            continue
        cases_path, graph_path = _files(path, part)
        cases = read_jsonl(cases_path)
        graph = read_graph(graph_path) if any(s.endswith("_retrieve") for s in wanted) else None
        seen: set[str] = set()
        for number, case in enumerate(cases, start=1):
            found = case_problems(case)
            if not found and case[0]["content"] in seen:
                found = [f"duplicate id {case[0]['content']}"]
            seen.add(None if found else case[0]["content"])
            problems += [f"{cases_path.name}: line {number}: {p}" for p in found]
            if not found:
                rows += [_row(case, s, graph if s.endswith("_retrieve") else None) for s in wanted]
    raise_problems(problems, path)
    return sample_table(rows, settings, limit, SCORER)


BENCHMARK = Benchmark(name="familytool", settings=SETTINGS, load=load_familytool, scorer=SCORER,
                      prompt_format=NATIVE_FORMAT, max_calls=3,
                      path_hint="the FamilyTool folder (datasets/familytool-{b,e}.jsonl, KG/familykg-{b,e}.jsonl)")
