"""BFCL's execution of a model's multi-turn calls, without ever executing the model's text.

BFCL (`multi_turn_utils.execute_multi_turn_func_call`) turns each decoded call into a string
(`decoded_output_to_execution_list`: `name(k=repr(v), ...)`, a dict whose values are all dicts
written as a nested call), prefixes every `word(` whose word is a public method of an involved
class with that class's instance (`_process_method_calls`, a regex that also rewrites such words
inside string literals), refuses eight names (`kill`, `exit`, ...), and hands the string to
Python's `eval()`. A model's text such as `[inspect.os.system(command='...')]` therefore runs
on BFCL's evaluating machine.

toolsweep builds the same string (so every quirk that changes a value, such as a rewritten string
literal, is kept) and then reads it with `ast` instead of `eval`: a call runs only when it is a
public method of one of the case's instances, reached the way BFCL's rewrite reaches it, with
arguments that are literals or such calls. Anything else is answered as BFCL answers a call it
cannot run, `Error during execution: ...` (for an unknown name, the NameError text BFCL's `eval`
gives; for a name `eval` would have found, such as a builtin or a module, the same NameError text:
BFCL would have run it). Results are written as BFCL writes them (a str as is, a dict as JSON
else `str`, anything else `str`).

A method runs with a time bound (SIGALRM, `STEP_SECONDS`, where the caller is the main thread):
one hostile call costs its own result, as an error text. Python-level work is interrupted; a
single C-level operation (a huge integer power) is not, the limit docs/benchmarks/bfcl.md names.
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
import re
import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from grading.scorers._python_calls import MAX_ANSWER_CHARS
from grading.scorers.bfcl.decoding import after_thinking, decode_prompting, hermes_blocks
from grading.scorers.bfcl.environments import STATELESS

DENIED = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
"""Names BFCL refuses before its `eval` (checked on the call's name as BFCL extracts it)."""
STEP_SECONDS = 10.0
"""How long one call may run before it is answered with a time-out error."""
_METHOD_WORD = re.compile(r"\b([a-zA-Z_]\w*)\s*(?=\()")
_MAX_DEPTH = 50


class Undecodable(Exception):
    """A step BFCL's `decode_execute` raises on (it ends the turn in the loop; skipped at grading)."""


def execution_list(text: str) -> list[str]:
    """BFCL's `default_decode_execute_prompting`: a raw prompt-mode step -> call strings; raises
    Undecodable where BFCL's decoder raises."""
    decoded = decode_prompting(text)
    if not decoded.ok:
        raise Undecodable(decoded.error)
    return calls_to_strings(decoded.calls)


def hermes_execution_list(text: str) -> list[str]:
    """BFCL's Hermes-style FC handler (`QwenFCHandler.decode_execute` on the text after the last
    `</think>`): every `<tool_call>` block that is JSON, each an object with `name` and `arguments`
    (an object, or JSON text of one), written `name(k=repr(v),...)` (`convert_to_function_call`:
    no space after the comma, no nested calls). Raises Undecodable where BFCL's handler raises."""
    strings = []
    for item in hermes_blocks(after_thinking(text)):
        if not isinstance(item, dict) or "name" not in item or "arguments" not in item:
            raise Undecodable("a tool-call block is not an object with name and arguments")
        arguments = item["arguments"]
        try:
            if isinstance(arguments, str):
                arguments = json.loads(arguments)
            strings.append(f"{item['name']}(" + ",".join(f"{k}={v!r}" for k, v in arguments.items()) + ")")
        except (ValueError, AttributeError, TypeError, RecursionError) as exc:
            raise Undecodable(f"{type(exc).__name__}: {exc}") from None
    return strings


def calls_to_strings(calls: list[dict[str, Any]]) -> list[str]:
    """BFCL's `decoded_output_to_execution_list` over decoded calls `[{name: {k: v}}]`."""
    strings = []
    for call in calls:
        if not isinstance(call, dict):
            raise Undecodable(f"a decoded item is a {type(call).__name__}, not a call")
        for name, arguments in call.items():
            if not isinstance(arguments, dict):
                raise Undecodable(f"the arguments of {name} are a {type(arguments).__name__}")
            strings.append(f"{name}(" + ", ".join(f"{k}={_nested(v)}" for k, v in arguments.items()) + ")")
    return strings


def _nested(value: Any) -> str:
    """BFCL's `parse_nested_value`: a dict of dicts is a nested call (an empty dict too, where
    BFCL's indexing of its first key raises), another dict `{'k': value}` (keys always quoted),
    anything else `repr`."""
    if isinstance(value, dict):
        if all(isinstance(v, dict) for v in value.values()):
            if not value:
                raise Undecodable("an empty dict argument (BFCL's decoder raises IndexError)")
            name = list(value.keys())[0]
            arguments = value[name]
            return f"{name}(" + ", ".join(f"{k}={_nested(v)}" for k, v in arguments.items()) + ")"
        return "{" + ", ".join(f"'{k}': {_nested(v)}" for k, v in value.items()) + "}"
    return repr(value)


def is_empty(calls: list[str]) -> bool:
    """BFCL's `is_empty_execute_response`."""
    return len(calls) == 0 or (len(calls) == 1 and len(calls[0]) == 0)


class CaseEnvironment:
    """The instances of one case's involved classes, as BFCL builds them, and calls run on them."""

    def __init__(self, classes: dict[str, type], initial_config: dict[str, Any], involved: list[str],
                 long_context: bool, label: str = "model") -> None:
        self.instances: dict[str, Any] = {}
        self._by_variable: dict[str, Any] = {}
        self.owner: dict[str, str] = {}
        """Public method name -> the instance variable BFCL's rewrite prefixes it with (a later class wins)."""
        for class_name in involved:
            instance = classes[class_name]()
            if class_name not in STATELESS:
                instance._load_scenario(copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context)
            variable = re.sub(r"[-./:]", "_", f"{label}_{class_name}_instance")
            self.instances[class_name] = instance
            self._by_variable[variable] = instance
            for method_name in _public_methods(instance):
                self.owner[method_name] = variable

    def run(self, calls: list[str]) -> list[str]:
        """Every call's result text, as BFCL's loop feeds it back (errors as text)."""
        with _alarm():
            return [self._one(call) for call in calls]

    def _one(self, call: str) -> str:
        processed = _METHOD_WORD.sub(lambda m: f"{self.owner[m[1]]}.{m[1]}" if m[1] in self.owner else m[1], call)
        name = processed.split("(")[0] if "(" in processed else processed
        if "." in name:
            name = name.split(".")[1]
        try:
            if name in DENIED:
                raise PermissionError(f"Function call {name} is not allowed.")
            result = self._evaluate(processed)
        except Exception as exc:  # noqa: BLE001 - BFCL answers every failure of a call with its text
            return f"Error during execution: {exc}"
        return _written(result)

    def _evaluate(self, text: str) -> Any:
        if len(text) > MAX_ANSWER_CHARS:
            raise ValueError(f"a call of {len(text)} characters is longer than toolsweep reads ({MAX_ANSWER_CHARS})")
        tree = ast.parse(text, filename="<string>", mode="eval")  # its SyntaxError reads as eval's
        with _time_bound(STEP_SECONDS):
            return self._node(tree.body, 0)


    def _node(self, node: ast.AST, depth: int) -> Any:
        """A value node: a literal, or a call of a declared method (nothing else is run)."""
        if depth > _MAX_DEPTH:
            raise RecursionError("maximum recursion depth exceeded")
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        if isinstance(node, ast.Name):
            raise NameError(f"name '{node.id}' is not defined")
        if isinstance(node, ast.Attribute):
            raise NameError(f"name '{_root(node)}' is not defined")
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [self._node(e, depth + 1) for e in node.elts]
            return items if isinstance(node, ast.List) else tuple(items) if isinstance(node, ast.Tuple) else set(items)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise SyntaxError("a ** entry is not a literal")
            return {self._node(k, depth + 1): self._node(v, depth + 1) for k, v in zip(node.keys, node.values)}
        try:
            return ast.literal_eval(node)  # constants and signed numbers (repr of a negative number)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
            raise SyntaxError(f"not a literal ({type(node).__name__}): {exc}") from None

    def _call(self, node: ast.Call, depth: int) -> Any:
        method = self._method(node.func)
        args = [self._node(a, depth + 1) for a in node.args]
        if any(k.arg is None for k in node.keywords):
            raise SyntaxError("** arguments are not read")
        kwargs = {k.arg: self._node(k.value, depth + 1) for k in node.keywords}
        return method(*args, **kwargs)

    def _method(self, func: ast.AST) -> Any:
        """The bound method a call names, reached only as BFCL's rewrite reaches it:
        `<instance variable>.<public method>`."""
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and self.owner.get(func.attr) == func.value.id):
            return getattr(self._by_variable[func.value.id], func.attr)
        if isinstance(func, ast.Name):
            raise NameError(f"name '{func.id}' is not defined")
        raise NameError(f"name '{_root(func)}' is not defined")


_METHODS: dict[type, tuple[str, ...]] = {}


def _public_methods(instance: Any) -> tuple[str, ...]:
    """The public bound methods BFCL maps (`inspect.getmembers(instance, ismethod)`), read once per class."""
    cls = type(instance)
    if cls not in _METHODS:
        _METHODS[cls] = tuple(name for name, _ in inspect.getmembers(instance, predicate=inspect.ismethod)
                              if not name.startswith("_"))
    return _METHODS[cls]


def _root(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else type(node).__name__


def _written(result: Any) -> str:
    """BFCL's text of a result: a str as is, a dict as JSON (else `str`), anything else `str`."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:  # noqa: BLE001 - BFCL falls back to str on any failure
            return str(result)
    return str(result)


class TimedOut(Exception):
    pass


_ARMED = threading.local()


def _expire(signum: int, frame: Optional[Any]) -> None:
    raise TimedOut(f"the call ran for more than {_ARMED.seconds:g} s and was stopped")


@contextmanager
def _alarm() -> Iterator[None]:
    """SIGALRM handled for one step's calls (main thread only: signals reach no other)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    previous = signal.signal(signal.SIGALRM, _expire)
    _ARMED.on = True
    try:
        yield
    finally:
        _ARMED.on = False
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def _time_bound(seconds: float) -> Iterator[None]:
    """Interrupt Python-level work after `seconds`, where `_alarm` handles the signal."""
    if not getattr(_ARMED, "on", False):
        yield
        return
    _ARMED.seconds = seconds
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
