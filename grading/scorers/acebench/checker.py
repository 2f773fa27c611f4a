"""ACEBench's reading of an answer and its `normal` checker, rewritten from the behaviour of its
evaluation (`eval_main.py` normal_single_turn_eval, `model_eval/checker.py` normal_checker,
`model_inference/utils.py` decode_ast), quirks kept; grading/scorers/acebench.py grades with it.

Reading (`decode`): every whitespace character is deleted from the answer, which must then parse as
one Python expression whose top node has elements (a list, tuple or set), each a call. A call
becomes `{dotted name: {keyword: value}}` (positional arguments are dropped). Values: literals as
Python gives them (`...` is the string "..."), a bare name is its text, a subscript is its source
text, a nested call a dict, a unary operator on a literal is its negation whatever the operator
(`+5` and `~5` read -5), and binary arithmetic is computed as `eval` computes it (ACEBench `eval`s
it; here over literals only, and within the bounds of grading/scorers/_python_calls.py, so no
answer holds the grader: a longer answer or a larger value cannot be read). Anything else cannot
be read.

Checking (`check`): the ground truth is one dict `{name: {param: value}}` or a list of such
alternatives (one passing alternative suffices). Against one alternative: as many calls as gold
keys; the names with a `_<digits>` suffix removed, and the multiset of called names equal to the
gold's; then each gold call passes when any call of that name passes the per-call check, with the
function description found as the first whose name is a substring of the gold key. Per call:
required parameters present, no parameter outside the description or the gold, then a type check
whose outcome decides whether the value is compared at all; strings pass when the normalised gold
is a substring of the normalised answer; integers, numbers and booleans are never compared.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from grading.scorers._python_calls import Arithmetic, Unreadable, dotted_name, parse_answer, standardize

# The checker's type table: the description's type name -> the Python type a value must have.
# `number` maps to int (a float for a number parameter is a type error unless the gold is a float),
# `enum` to a type no value has (so an enum value is only ever checked against the gold's type).
PY_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list,
    "dict": dict, "any": str, "list": list, "object": dict, "objectArray": list, "list(string)": list,
    "list(enum)": list, "int": int, "enum": enumerate, "number": int,
}
# Types whose items get a type of their own (`items.type`, else one guessed from the type's name).
CONTAINER_TYPES = ("array", "tuple", "list(string)", "list(enum)", "object", "objectArray")
_REPEAT_SUFFIX = re.compile(r"_\d+$")

WRONG_FORMAT = "wrong_output_format"
CRASH = "checker_error"
"""Where ACEBench's own checker raises (and its whole evaluation stops), toolsweep grades wrong."""


class Undecodable(Exception):
    """The answer is not a list of calls ACEBench can read."""


class CheckerCrash(Exception):
    """ACEBench's checker would raise here (a value shape it does not handle)."""


@dataclass(frozen=True)
class Verdict:
    """One answer's outcome: correct or not, and why not (ACEBench's error class)."""

    correct: bool
    error_type: str | None = None


# --- reading -------------------------------------------------------------------------------------

def decode(answer: str | None) -> list[dict[str, Any]]:
    """The calls of an answer as `[{name: {param: value}}]`, or Undecodable (ACEBench's evaluation
    counts any exception of its reader as a wrong format, a recursion too deep included)."""
    compact = "".join((answer or "").split())
    try:
        body = parse_answer(compact)
    except Unreadable as exc:
        raise Undecodable(str(exc)) from None
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Undecodable(f"not a Python expression: {exc}") from None
    elements = getattr(body, "elts", None)
    if elements is None:
        raise Undecodable(f"the answer is a {type(body).__name__}, not a list of calls")
    arithmetic = Arithmetic()  # ACEBench `eval`s arithmetic: computed here over literals, within bounds
    calls = []
    for element in elements:
        if not isinstance(element, ast.Call):
            raise Undecodable(f"an element is a {type(element).__name__}, not a call")
        try:
            calls.append(_value(element, arithmetic))
        except (RecursionError, MemoryError) as exc:
            raise Undecodable(f"a value nested too deep to read: {type(exc).__name__}") from None
    return calls


def _value(node: ast.AST, arithmetic: Arithmetic) -> Any:
    """One argument value as ACEBench's reader gives it."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        # the operator is ignored: the operand's literal value is negated
        literal = getattr(node.operand, "value", _MISSING)
        if literal is _MISSING:
            raise Undecodable("a unary operator on something other than a literal")
        try:
            return -literal
        except TypeError as exc:
            raise Undecodable(str(exc)) from None
    if isinstance(node, ast.List):
        return [_value(v, arithmetic) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(v, arithmetic) for v in node.elts)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise Undecodable("a ** entry in a dict")
        try:
            return {_value(k, arithmetic): _value(v, arithmetic) for k, v in zip(node.keys, node.values)}
        except TypeError as exc:  # an unhashable key
            raise Undecodable(str(exc)) from None
    if isinstance(node, ast.BinOp):
        try:
            return arithmetic.evaluate(node)
        except (Unreadable, TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError,
                MemoryError) as exc:
            raise Undecodable(f"arithmetic failed: {exc}") from None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return {dotted_name(node.func): {k.arg: _value(k.value, arithmetic) for k in node.keywords}}
    if isinstance(node, ast.Subscript):
        return f"{ast.unparse(node.value)}[{ast.unparse(node.slice)}]"
    raise Undecodable(f"a {type(node).__name__} value")


_MISSING = object()


# --- checking ------------------------------------------------------------------------------------

def grade_answer(answer: str | None, functions: list[dict[str, Any]], ground_truth: Any) -> Verdict:
    """The verdict ACEBench gives one answer: unreadable answers are wrong (`wrong_output_format`),
    and a ground truth that is a list is a list of alternatives."""
    try:
        calls = decode(answer)
    except Undecodable:
        return Verdict(False, WRONG_FORMAT)
    return check(calls, functions, ground_truth)


def check(calls: list[dict[str, Any]], functions: list[dict[str, Any]], ground_truth: Any) -> Verdict:
    """The verdict on decoded calls; the error class is the first alternative's."""
    alternatives = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    first_error = None
    for gold in alternatives:
        try:
            error = _check_alternative(calls, functions, gold)
        except (CheckerCrash, TypeError, AttributeError, KeyError, IndexError):
            error = CRASH
        if error is None:
            return Verdict(True)
        first_error = first_error or error
    return Verdict(False, first_error)


def _check_alternative(calls: list[dict[str, Any]], functions: list[dict[str, Any]],
                       gold: dict[str, Any]) -> str | None:
    """None when the calls pass against one gold dict, else the error class."""
    if len(calls) != len(gold):
        return "wrong functions number"
    # repeated calls are keyed Name_1, Name_2 in the gold; the description is still found by the key
    expected = [(key, _REPEAT_SUFFIX.sub("", key), params) for key, params in gold.items()]
    called = Counter(name for call in calls for name in call)
    wanted = Counter(name for _, name, _ in expected)
    if set(called) != set(wanted) or called != wanted:
        return "function_mismatch"
    for key, name, params in expected:
        description = _description(functions, key)
        error = "simple_function_checker:unclear"
        for call in calls:
            if next(iter(call)) != name:
                # a later call of another name replaces the error of an earlier failed one
                error = "simple_function_checker:unclear"
                continue
            error = _check_call(description, call, {name: params})
            if error is None:
                break
        if error is not None:
            return error
    return None


def _description(functions: list[dict[str, Any]], key: str) -> dict[str, Any]:
    for function in functions:
        if function["name"] in key:
            return function
    raise CheckerCrash(f"no function description for {key!r}")


def _check_call(description: dict[str, Any], call: dict[str, Any], gold: dict[str, Any]) -> str | None:
    """One call against one gold call: None when it passes, else the error class."""
    gold_params = next(iter(gold.values()))
    call_params = next(iter(call.values()))
    declared = description["parameters"]
    if call_params == {} or declared == {}:
        return None if call_params == {} and declared == {} else "wrong_param"
    if gold_params == declared["properties"]:
        return None
    if gold_params == {}:
        return "wrong_param"
    name = description["name"]
    if name not in call:
        return "wrong_function_name"
    given, properties = call[name], declared["properties"]
    if any(p not in given for p in declared["required"]):
        return "lack_args"
    for param, value in given.items():
        if param not in properties or param not in gold_params:
            return "addition_args"
        error = _check_value(properties[param], value, gold_params[param])
        if error is not None:
            return error
    return None


def _check_value(spec: dict[str, Any], value: Any, gold: Any) -> str | None:
    type_name = spec["type"]
    expected = PY_TYPES[type_name]
    item_type = _item_type(spec) if type_name in CONTAINER_TYPES else None
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    if type_name == "float" and type(value) is int:
        value = float(value)
    valid, compared = _type_check(value, gold, expected, item_type)
    if not valid:
        return "type_error"
    if not compared:
        return None
    if expected is dict:
        return _dict_error(value, gold)
    if expected is list and item_type is dict:
        return _object_list_error(type_name, value, gold)
    if expected is str:
        return None if standardize(gold) in standardize(value) else "value_error:string"
    if expected is list:
        return None if _normalised_items(value) == _normalised_items(gold) else "value_error:list/tuple"
    return None  # integers, numbers, booleans: the type was all that counted


def _item_type(spec: dict[str, Any]) -> type:
    try:
        name = spec["items"]["type"]
    except (KeyError, TypeError, IndexError):
        name = "string" if "string" in spec["type"] else "enum" if "enum" in spec["type"] else "dict"
    return PY_TYPES[name]


def _literal_bool(value: Any) -> Any:
    """The strings "true" and "false" count as booleans before any type is checked."""
    if value == "true":
        return True
    if value == "false":
        return False
    return value


def _type_check(value: Any, gold: Any, expected: type, item_type: type | None) -> tuple[bool, bool]:
    """(type accepted, value to be compared). A gold value whose type differs from the declared
    one makes the value a "variable": accepted on the gold's type alone, never compared. An empty
    gold string is no type at all."""
    gold_type = type(gold) if gold != "" else None
    variable = gold_type is not None and gold_type != expected
    value = _literal_bool(value)
    valid = True
    if type(value) == expected:  # exact: a bool is not an int here
        if item_type is None:
            return True, not variable
        for gold_item in gold:
            if type(gold_item) != list or all(_type_check(v, gold_item, item_type, None)[0] for v in value):
                return True, not variable
        valid = False  # no gold item accepted the items: only the gold's own type can save it
    if gold_type is not None and (type(value) == gold_type or gold == value):
        return valid, False
    return False, False


def _normalised_items(items: Any) -> list[Any]:
    return [standardize(i) if type(i) == str else i for i in items]


def _object_list_error(type_name: str, value: list[Any], gold: Any) -> str | None:
    if type_name == "objectArray" and len(value) != len(gold):
        return "value_error:dict_items"
    if type_name == "objectArray" and value and gold:
        # upstream calls its dict check with an argument missing here and raises
        raise CheckerCrash("objectArray items")
    if len(value) != len(gold):
        return "value_error:list_dict_count"
    for item, gold_item in zip(value, gold):
        error = _dict_error(item, gold_item)
        if error is not None:
            return error
    return None


def _dict_error(value: Any, gold: Any) -> str | None:
    """An object value against its gold: same number of keys, each key in the gold, each value
    passing when the gold's text (normalised, for a string) is a substring of the value's text."""
    if not isinstance(value, dict):
        return "value_error"
    if len(value) != len(gold.keys()):
        return "value_error"
    for key, item in value.items():
        item = _literal_bool(item)
        if key not in gold:
            return "value_error"
        want = gold[key]
        if isinstance(want, dict):
            error = _dict_error(item, want)
            if error is not None:
                return error
            continue
        got = standardize(item) if type(item) == str else item
        want = standardize(want) if type(want) == str else want
        if str(want) not in str(got):
            return "value_error"
    return None
