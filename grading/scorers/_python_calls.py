"""Pieces BFCL's and ACEBench's checkers share, the same in both benchmarks' code: the string
normal form their values are compared in, the dotted name of a call read with `ast`, and the
bounded parsing and arithmetic both readers use where the authors' code calls `eval`.

Private (a leading underscore): not a scorer, so `grading.scoring.scorer_names` leaves it out.
"""

from __future__ import annotations

import ast
import operator
import re
from typing import Any

_STRIPPED = re.compile(r"[ ,./\-_*^]")


def standardize(text: str) -> str:
    """BFCL's `standardize_string`, ACEBench's too: spaces and `,./-_*^` removed, lower case, `'` as `"`."""
    return _STRIPPED.sub("", text).lower().replace("'", '"')


def dotted_name(func: ast.AST) -> str:
    """A call's function as written, `module.sub.name`: the attribute chain down to a plain name
    (parts that are neither, such as a call or a subscript, are left out)."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


# --- bounded reading ---------------------------------------------------------------------------
# Both benchmarks' readers hand arithmetic in a value (`x=2*3`) to Python's `eval`; toolsweep
# computes it over literals only, and within bounds, so that no answer can hold the grader longer
# than a bounded time or take more than a bounded memory (`(9**9999)**9999` would never return,
# `'a'*10**10` would take 10 GB).

MAX_ANSWER_CHARS = 200_000
"""Longest text the readers parse (parsing and reading take time and memory in proportion: up to
about 1.3 s and 120 MB at this length on a 2-core machine); a 4096-token answer is far shorter."""
MAX_INT_BITS = 100_000
"""Largest integer arithmetic builds (about 30,100 decimal digits), so no operation on two of
them takes more than milliseconds."""
MAX_COMPUTED = 1_000_000
"""What the results of all the operators in one answer, intermediate ones included, may hold
together: a string counts its characters, an integer its bits, a list, tuple, set or dict 1 plus
its items' sizes, anything else 1."""
_FORMAT_WIDTH = re.compile(r"\d+")
_FORMAT_WIDTH_DIGITS = 9
"""A longer number in a format template counts as past every bound (and is never converted: Python
refuses to read over 4,300 digits)."""
_FORMAT_REPR_FACTOR = 32
"""Characters a unit of a value may take when formatted (`'\\U000e0001'` is 12 for 1; a float 24)."""
_FORMAT_SLACK = 400
"""Characters one conversion may write beyond its width and its value (`'%f' % 1e308` writes 316)."""
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
           ast.BitXor: operator.xor, ast.BitAnd: operator.and_, ast.MatMult: operator.matmul}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
_DISPLAYS = {ast.List: list, ast.Tuple: tuple, ast.Set: set}
_DISPLAY_NODES = tuple(_DISPLAYS)
_SEQUENCES = (str, bytes, list, tuple)
_CONTAINERS = (list, tuple, set, frozenset, dict)


class Unreadable(ValueError):
    """Arithmetic the readers do not compute: an operand that is not a literal, or a value or an
    answer past toolsweep's bounds. The reader counts the answer as one that does not decode."""


def parse_answer(text: str) -> ast.expr:
    """The answer parsed as one Python expression (its body), within MAX_ANSWER_CHARS; Unreadable
    past it, SyntaxError (or ValueError, RecursionError, MemoryError from the parser) where it is
    not Python."""
    if len(text) > MAX_ANSWER_CHARS:
        raise Unreadable(f"an answer of {len(text):,} characters, past toolsweep's bound of "
                         f"{MAX_ANSWER_CHARS:,} for a text it parses")
    return ast.parse(text, mode="eval").body


class Arithmetic:
    """`eval` of literals and operators for one answer: the value Python gives, or Unreadable
    where an operand is not a literal or a result would pass the bounds (checked before it is
    built). Python's own errors (TypeError, ZeroDivisionError, OverflowError, ValueError) pass
    through, as `eval` raises them. One instance per answer: MAX_COMPUTED is the answer's."""

    def __init__(self) -> None:
        self.built = 0
        """Size of everything computed so far."""

    def evaluate(self, node: ast.AST) -> Any:
        """The value of an expression of literals and operators, as `eval` gives it."""
        return self._sized(node)[0]

    def _sized(self, node: ast.AST) -> tuple[Any, int]:
        if isinstance(node, ast.Constant):
            return node.value, _size(node.value)
        if isinstance(node, _DISPLAY_NODES):
            items = [self._sized(v) for v in node.elts]
            return _DISPLAYS[type(node)](v for v, _ in items), 1 + sum(s for _, s in items)
        if isinstance(node, ast.Dict) and None not in node.keys:
            keys, values = [self._sized(k) for k in node.keys], [self._sized(v) for v in node.values]
            return {k: v for (k, _), (v, _) in zip(keys, values)}, 1 + sum(s for _, s in keys + values)
        if isinstance(node, ast.UnaryOp):
            value, _ = self._sized(node.operand)
            result = _UNARY[type(node.op)](value)
            return result, self._account(result, _size(result))
        if isinstance(node, ast.BinOp):
            return self._binary(node.op, self._sized(node.left), self._sized(node.right))
        raise Unreadable(f"arithmetic over a {type(node).__name__}, which toolsweep does not evaluate "
                         "(the authors' code hands it to eval)")

    def _binary(self, op: ast.operator, left: tuple[Any, int], right: tuple[Any, int]) -> tuple[Any, int]:
        least = _least_size(op, left, right)
        if _int_result(op, left[0], right[0]) and least > MAX_INT_BITS:
            raise Unreadable(f"an integer of at least {least:,} bits, past toolsweep's bound of "
                             f"{MAX_INT_BITS:,} bits for a computed value")
        self._check_budget(least)
        result = _BINARY[type(op)](left[0], right[0])
        size = _container_size(op, left, right) if isinstance(result, _CONTAINERS) else _size(result)
        return result, self._account(result, size)

    def _account(self, result: Any, size: int) -> int:
        if type(result) is int and result.bit_length() > MAX_INT_BITS:
            raise Unreadable(f"an integer of {result.bit_length():,} bits, past toolsweep's bound of "
                             f"{MAX_INT_BITS:,} bits for a computed value")
        self._check_budget(size)
        self.built += size
        return size

    def _check_budget(self, size: int) -> None:
        if self.built + size > MAX_COMPUTED:
            raise Unreadable(f"arithmetic building {self.built + size:,} units in one answer, past toolsweep's "
                             f"bound of {MAX_COMPUTED:,} (a character, an item or a bit each)")


def _size(value: Any) -> int:
    """A non-container value's size as MAX_COMPUTED counts it (a container's is summed from its
    parts as it is built, never walked: a list repeated in a list shares its items)."""
    if isinstance(value, int):
        return max(1, abs(value).bit_length())
    if isinstance(value, (str, bytes)):
        return max(1, len(value))
    return 1


def _int_result(op: ast.operator, left: Any, right: Any) -> bool:
    return isinstance(op, (ast.Pow, ast.Mult, ast.LShift)) and isinstance(left, int) and isinstance(right, int)


def _least_size(op: ast.operator, left: tuple[Any, int], right: tuple[Any, int]) -> int:
    """A size the result is sure to reach, for the operations that can grow past their operands
    (0 for the others, whose results are no larger than their operands together); for a string
    format, an upper estimate of its length, as no useful lower one exists."""
    (a, a_size), (b, b_size) = left, right
    if isinstance(op, ast.Pow) and isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
        return (abs(a).bit_length() - 1) * b + 1
    if isinstance(op, ast.LShift) and isinstance(a, int) and isinstance(b, int) and b > 0 and a != 0:
        return abs(a).bit_length() + b
    if isinstance(op, ast.Mult):
        if isinstance(a, int) and isinstance(b, int):
            return 0 if a == 0 or b == 0 else abs(a).bit_length() + abs(b).bit_length() - 1
        if isinstance(a, _SEQUENCES) and isinstance(b, int):
            return _repeated_size(a, a_size, b)
        if isinstance(b, _SEQUENCES) and isinstance(a, int):
            return _repeated_size(b, b_size, a)
    if isinstance(op, ast.Mod) and isinstance(a, (str, bytes)):
        return _format_size(a, b, b_size)
    return 0


def _repeated_size(sequence: Any, size: int, times: int) -> int:
    if times <= 0:
        return 1
    if isinstance(sequence, (str, bytes)):
        return max(1, len(sequence) * times)
    return 1 + (size - 1) * times


def _container_size(op: ast.operator, left: tuple[Any, int], right: tuple[Any, int]) -> int:
    """A container result's size from its operands' (exact for a repetition or a concatenation;
    a set or dict operator counts both operands), never walking the result."""
    (a, a_size), (b, b_size) = left, right
    if isinstance(op, ast.Mult):
        return _repeated_size(a, a_size, b) if isinstance(b, int) else _repeated_size(b, b_size, a)
    if isinstance(op, ast.Add):
        return a_size + b_size - 1
    return a_size + b_size


def _format_size(template: str | bytes, arguments: Any, arguments_size: int) -> int:
    """An upper estimate of `template % arguments`: each conversion at most the largest width or
    precision the template (or a `*` argument) asks for, plus every argument written out."""
    text = template if isinstance(template, str) else template.decode("latin-1")
    conversions = text.count("%")
    if not conversions:
        return len(text)
    widths = [int(w) if len(w) <= _FORMAT_WIDTH_DIGITS else MAX_COMPUTED + 1 for w in _FORMAT_WIDTH.findall(text)]
    if "*" in text:
        items = arguments if isinstance(arguments, tuple) else (arguments,)
        widths += [abs(v) for v in items if isinstance(v, int)]
    each = max(widths, default=0) + _FORMAT_REPR_FACTOR * arguments_size + _FORMAT_SLACK
    return len(text) + conversions * each
