"""Python source read and written: a Python file's top-level constants, read without running it
(the authors' prompt texts, taken from the user's copy of their code, never imported, never
shipped), and calls written as a Python list (the benchmarks' prompt-mode answers)."""

from __future__ import annotations

import ast
from typing import Any, Iterable


def literal_constants(source: str, filename: str) -> dict[str, Any]:
    """Top-level `NAME = <literal>` values (strings, numbers, lists, tuples as lists, dicts, strings
    joined with `+`); a name inside a literal resolves to an earlier constant. Later assignments win, as they would on
    import; other statements are skipped. A SyntaxError is the caller's to word."""
    found: dict[str, Any] = {}
    for node in ast.parse(source, filename=filename).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = literal_value(node.value, found)
            except ValueError:
                continue
    return found


def literal_value(node: ast.AST, known: dict[str, Any]) -> Any:
    """The value of a literal expression (as `literal_constants` reads one), a name standing for its
    value in `known`; ValueError for anything else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {literal_value(k, known): literal_value(v, known) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal_value(v, known) for v in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = literal_value(node.left, known), literal_value(node.right, known)
        if isinstance(left, str) and isinstance(right, str):
            return left + right  # a text joined from two (`"{functions}\n" + OTHER_PROMPT`)
    raise ValueError("not a literal")


def python_call_list(calls: Iterable[tuple[str, dict[str, Any]]]) -> str:
    """Calls in Python syntax, as a list: `[f(a=1, b='x'), g()]`, keyword arguments in the given
    order, values as `repr` writes them (Python literals)."""
    return "[" + ", ".join(f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in arguments.items()) + ")"
                           for name, arguments in calls) + "]"
