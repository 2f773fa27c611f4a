"""A Lark grammar of BFCL's prompt-mode answer: a Python list of calls to the case's functions.

`[f(a=1, b='x'), g(c=[1, 2])]`, calls separated by `, `, at most `max_calls` of them, or `[]`:
BFCL reads `[]` as no call, so the grammar lets every case decline that way (the same grammar
for every category: the model is not told which ones expect no call). A call names one of the
case's functions; its keyword arguments are that function's declared parameters in declaration
order, each at most once, the required ones always there (BFCL's checker fails a call without
them; Python refuses a repeated keyword, which BFCL then cannot decode). A value is any Python
literal (string, number, True/False/None, list, dict): BFCL accepts a value of the possible
answer's own type for any parameter (its "variables", None among them), so a grammar typed by
the declaration would reject gold answers.

One grammar text serves xgrammar and guidance (vLLM's `grammar` field takes Lark for both);
outlines takes no grammar. Optional and repeated parts are written out as rules (no `{m,n}`
ranges, no empty rules), so every Lark dialect reads it.
"""

from __future__ import annotations

import json
from typing import Any

_VALUES = r"""
value: STRING | NUMBER | "True" | "False" | "None" | list | dict
list: "[" "]" | "[" value (", " value)* "]"
dict: "{" "}" | "{" entry (", " entry)* "}"
entry: STRING ": " value
STRING: /"([^"\\\n]|\\.)*"|'([^'\\\n]|\\.)*'/
NUMBER: /-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/
"""


def _literal(text: str) -> str:
    """A Lark string literal (non-ASCII kept as is: some parameter names are not ASCII)."""
    return json.dumps(text, ensure_ascii=False)


def call_grammar(functions: list[dict[str, Any]], max_calls: int) -> str:
    """The grammar of one case's answer (see the module docstring)."""
    lines = ['start: "[" "]" | "[" calls_1 "]"']
    for k in range(1, max_calls + 1):
        lines.append(f'calls_{k}: call' + (f' | call ", " calls_{k + 1}' if k < max_calls else ""))
    if functions:
        lines.append("call: " + " | ".join(f"fn_{i}" for i in range(len(functions))))
    else:
        lines[0] = 'start: "[" "]"'
        lines = lines[:1]
    for i, function in enumerate(functions):
        lines += _function_rules(i, function)
    return "\n".join(lines) + "\n" + (_VALUES.strip() + "\n" if functions else "")


def _function_rules(index: int, function: dict[str, Any]) -> list[str]:
    params = function.get("parameters") or {}
    names = list(params.get("properties") or {})
    required = set(params.get("required") or []) & set(names)
    opening, rules = _literal(function['name'] + '('), []
    head = f"fn_{index}: {opening}"
    if not names:
        return [f'{head} ")"']
    optional_rest = [all(n not in required for n in names[j:]) for j in range(len(names))]

    def rule(j: int, lead: bool) -> str:
        return f"fn_{index}_{j}_{'s' if lead else 'f'}"

    for j, name in enumerate(names):
        for lead in (False, True):
            arg = f'{_literal((", " if lead else "") + name + "=")} value'
            if j + 1 == len(names):
                taken = arg
            elif optional_rest[j + 1]:
                taken = f"{arg} {rule(j + 1, True)} | {arg}"
            else:
                taken = f"{arg} {rule(j + 1, True)}"
            skipped = f" | {rule(j + 1, lead)}" if name not in required and j + 1 < len(names) else ""
            rules.append(f"{rule(j, lead)}: {taken}{skipped}")
    body = f'{head} {rule(0, False)} ")"'
    if optional_rest[0]:
        body += f' | {opening} ")"'
    return [body, *rules]
