"""BFCL's AST checker (`bfcl_eval/eval_checker/ast_eval/ast_checker.py`), reimplemented for Python
answers: the same rules in the same order, the same verdicts and error types, quirks kept.

A call is right when its function is the expected one (names compared exactly: BFCL turns `.`
into `_` only for models that cannot call dotted names, never in prompt mode), every required
parameter is there, every given parameter is declared and listed in the possible answer, each
value passes the type rules and equals one of the acceptable values, and every listed parameter
left out may be left out (`""` among its values). Type rules: the declared type's Python type
(`tuple` as list, `any` as str), an int accepted for a float, and a value of the possible
answer's own type accepted as a "variable" (then compared exactly, no normalisation). Strings
compare after `standardize`; a list element by element (strings standardized); a dict key by key
against each acceptable dict; a list of dicts dict by dict in order. Parallel answers match the
expected calls in any order, greedily: each expected call takes the first unused answer call that
passes. Simple categories check the only function; multiple ones the expected call's function.

Where BFCL's checker would raise (a possible answer naming a function the case lacks, an
acceptable value of a shape its comparisons do not handle), BFCL's whole evaluation stops; here
the answer is wrong with error type `checker_error:<exception>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from grading.scorers._python_calls import standardize

PYTHON_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool,
                                 "array": list, "tuple": list, "dict": dict, "any": str}
NESTED_TYPES = ("array", "tuple")


@dataclass(frozen=True)
class Verdict:
    valid: bool
    error_type: Optional[str] = None
    error: Optional[str] = None


RIGHT = Verdict(True)


def _wrong(error_type: str, error: str) -> Verdict:
    return Verdict(False, error_type, error)


def check(category: str, functions: list[dict], calls: list[dict], possible: list[dict],
          underscore_to_dot: bool = False) -> Verdict:
    """BFCL's `ast_checker` for a Python category: the checker its name picks."""
    try:
        if "parallel" in category:
            return _parallel(functions, calls, possible, underscore_to_dot)
        if "multiple" in category:
            return _multiple(functions, calls, possible, underscore_to_dot)
        if len(calls) != 1:
            return _wrong("simple_function_checker:wrong_count", "Wrong number of functions.")
        return check_call(functions[0], calls[0], possible[0], underscore_to_dot)
    except (TypeError, KeyError, AttributeError, IndexError, ValueError) as exc:
        return _wrong(f"checker_error:{type(exc).__name__}", f"BFCL's checker would raise here: {exc}"[:300])


def _describe(functions: list[dict], name: str) -> Optional[dict]:
    return next((f for f in functions if f["name"] == name), None)


def _multiple(functions: list[dict], calls: list[dict], possible: list[dict], underscore_to_dot: bool) -> Verdict:
    if len(calls) != len(possible):
        return _wrong("multiple_function_checker:wrong_count", "Wrong number of functions.")
    expected = next(iter(possible[0]))
    return check_call(_describe(functions, expected), calls[0], possible[0], underscore_to_dot)


def _parallel(functions: list[dict], calls: list[dict], possible: list[dict], underscore_to_dot: bool) -> Verdict:
    if len(calls) != len(possible):
        return _wrong("parallel_function_checker_no_order:wrong_count", "Wrong number of functions.")
    used: list[int] = []
    for index, answer in enumerate(possible):
        description = _describe(functions, next(iter(answer)))
        verdict = None
        for position, call in enumerate(calls):
            if position in used:
                continue
            verdict = check_call(description, call, answer, underscore_to_dot)
            if verdict.valid:
                used.append(position)
                break
        if verdict is not None and not verdict.valid:
            return _wrong("parallel_function_checker_no_order:cannot_find_match",
                          f"no answer call matches expected call {index} ({verdict.error_type})")
    return RIGHT


def expected_name(name: str, underscore_to_dot: bool) -> str:
    """BFCL's `convert_func_name`: dots become underscores only for models flagged so."""
    return name.replace(".", "_") if underscore_to_dot and "." in name else name


def check_call(description: dict, call: dict, possible: dict, underscore_to_dot: bool = False) -> Verdict:
    """BFCL's `simple_function_checker`: one answer call against one expected call."""
    acceptable = next(iter(possible.values()))
    name = expected_name(description["name"], underscore_to_dot)
    declared, required = description["parameters"]["properties"], description["parameters"]["required"]
    if name not in call:
        return _wrong("simple_function_checker:wrong_func_name", f"Function name {name!r} not found in model output.")
    given = call[name]
    for param in required:
        if param not in given:
            return _wrong("simple_function_checker:missing_required", f"Missing required parameter: {param!r}.")
    for param, value in given.items():
        if param not in declared or param not in acceptable:
            return _wrong("simple_function_checker:unexpected_param", f"Unexpected parameter: {param!r}.")
        verdict = _check_value(param, value, declared[param], acceptable[param])
        if not verdict.valid:
            return verdict
    for param, values in acceptable.items():
        if param not in given and "" not in values:
            return _wrong("simple_function_checker:missing_optional",
                          f"Optional parameter {param!r} not provided and not marked as optional.")
    return RIGHT


def _check_value(param: str, value: Any, spec: dict, values: list) -> Verdict:
    declared = spec["type"]
    expected = PYTHON_TYPES[declared]
    nested = PYTHON_TYPES[spec["items"]["type"]] if declared in NESTED_TYPES else None
    if declared == "tuple" and type(value) is tuple:
        value = list(value)  # acceptable values went through JSON, where a tuple is a list
    if declared == "float" and type(value) is int:
        value = float(value)
    verdict, variable = _check_type(param, value, values, declared, expected, nested)
    if not verdict.valid:
        return verdict
    if not variable:
        if expected is dict:
            return _check_dict(param, value, values)
        if expected is list and nested is dict:
            return _check_dict_list(param, value, values)
        if expected is str:
            return _check_string(param, value, values)
        if expected is list:
            return _check_list(param, value, values)
    if value not in values:
        return _wrong("value_error:others", f"Invalid value for parameter {param!r}: {value!r}. Expected one of {values}.")
    return RIGHT


def _answer_type(values: list) -> Optional[type]:
    """The type of the first acceptable value that is not the may-be-omitted marker."""
    return next((type(v) for v in values if v != ""), None)


def _check_type(param: str, value: Any, values: list, declared: str, expected: type,
                nested: Optional[type]) -> tuple[Verdict, bool]:
    """BFCL's `type_checker`: (verdict, whether the value counts as a variable). A value of the
    acceptable values' own type passes as a variable, except after a failed nested check, whose
    failure it keeps (BFCL returns its result object as it stands)."""
    answer_type = _answer_type(values)
    variable = answer_type is not None and answer_type is not expected
    nested_failed = False
    if type(value) is expected:
        if nested is None:
            return RIGHT, variable
        for item in values:
            fits = True
            if type(item) is list:
                fits = all(_check_type(param, element, item, str(nested), nested, None)[0].valid for element in value)
            if fits:
                return RIGHT, variable
        nested_failed = True
    if answer_type is not None and type(value) is answer_type:
        if nested_failed:
            return _wrong("type_error:nested", f"Nested type checking failed for parameter {param!r}."), True
        return RIGHT, True
    return _wrong("type_error:simple", f"Incorrect type for parameter {param!r}. Expected type {declared}, "
                                       f"got {type(value).__name__}."), False


def _check_string(param: str, value: str, values: list) -> Verdict:
    if standardize(value) not in [standardize(v) for v in values if type(v) is str]:
        return _wrong("value_error:string", f"Invalid value for parameter {param!r}: {value!r}. Expected one of "
                                            f"{values}. Case insensitive.")
    return RIGHT


def _standard_items(items: Any) -> list:
    # BFCL walks an acceptable value by index: a string by its characters, "" (omittable) as []
    return [standardize(items[j]) if type(items[j]) is str else items[j] for j in range(len(items))]


def _check_list(param: str, value: list, values: list) -> Verdict:
    given = [standardize(v) if type(v) is str else v for v in value]
    if given not in [_standard_items(v) for v in values]:
        return _wrong("value_error:list/tuple", f"Invalid value for parameter {param!r}: {value!r}. Expected one "
                                                f"of {values}.")
    return RIGHT


def _check_dict(param: str, value: dict, values: list) -> Verdict:
    """BFCL's `dict_checker`: the value against each acceptable dict; the last failure is kept."""
    verdict = _wrong("dict_checker:unclear", "no acceptable dict")
    for option in values:
        if option == "":
            continue
        verdict = _dict_against(value, option)
        if verdict.valid:
            return RIGHT
    return verdict


def _dict_against(value: dict, option: dict) -> Verdict:
    # Both passes run, as in BFCL, so a missing key found after a wrong value names the verdict.
    verdict = RIGHT
    for key, item in value.items():
        if key not in option:
            verdict = _wrong("value_error:dict_key", f"Unexpected dict key parameter: {key!r}.")
            break
        item = standardize(item) if type(item) is str else item
        if item not in _standard_items(option[key]):
            verdict = _wrong("value_error:dict_value", f"Invalid value for parameter {key!r}: {item!r}.")
            break
    for key, allowed in option.items():
        if key not in value and "" not in allowed:
            return _wrong("value_error:dict_key", f"Missing dict key parameter: {key!r}.")
    return verdict


def _check_dict_list(param: str, value: list, values: list) -> Verdict:
    """BFCL's `list_dict_checker`: the dicts in order against each acceptable list."""
    verdict = _wrong("list_dict_checker:unclear", "no acceptable list")
    for option in values:
        if len(value) != len(option):
            verdict = _wrong("value_error:list_dict_count", "Wrong number of dictionaries in the list.")
            continue
        for index, item in enumerate(value):
            verdict = _check_dict(param, item, [option[index]])
            if not verdict.valid:
                break
        else:
            return RIGHT
    return verdict
