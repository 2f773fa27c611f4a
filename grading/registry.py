"""Find a named part (a scorer, a benchmark, a solver) by module name, with no list to edit.

A short name is a module of the given package; a dotted name is any importable module. The
module must define the attribute the kind of part asks for (SCORER, BENCHMARK, SOLVER).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any


class NotFound(LookupError):
    """No such module, or the module lacks the attribute; the message says which."""


def names_in(package: str, exclude: tuple[str, ...] = ()) -> list[str]:
    """The public modules and subpackages of `package`."""
    found = importlib.import_module(package)
    return sorted(m.name for m in pkgutil.iter_modules(found.__path__)
                  if not m.name.startswith("_") and m.name not in exclude)


def find(name: str, package: str, attribute: str) -> Any:
    """`attribute` of module `name` (a module of `package`, or a dotted module path)."""
    module_name = name if "." in name else f"{package}.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise NotFound(f"no module {module_name!r}") from None
        raise  # the module exists but one of its own imports is missing: show that
    if not hasattr(module, attribute):
        raise NotFound(f"module {module_name!r} defines no {attribute}")
    return getattr(module, attribute)
