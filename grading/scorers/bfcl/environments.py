"""BFCL's multi-turn environments: BFCL's own classes, loaded from the user's copy of BFCL's code.

The four multi-turn categories run their calls against eight Python classes (a file system, a
math API, messages, posting, tickets, trading, travel, vehicle: `bfcl_eval/eval_checker/
multi_turn_eval/func_source_code/*.py`). Verdicts depend on every detail of their state and their
return texts, so toolsweep runs BFCL's classes themselves rather than a re-implementation that
would drift: they are read from the user's copy of BFCL (`dataset.bfcl_eval`: the bfcl_eval wheel
`make install` fetches, a gorilla checkout or its bfcl_eval folder), never shipped. Each module is
executed in a namespace of its own, its one import of a sibling (`long_context`) answered from
that namespace, so nothing named `bfcl_eval` enters `sys.modules` and a BFCL installed beside
toolsweep is never touched. The model's text never reaches this code as code: execution.py
dispatches parsed calls to public methods only.
"""

from __future__ import annotations

import builtins
import hashlib
import types
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from grading.errors import GradingError

SOURCE_DIR = "bfcl_eval/eval_checker/multi_turn_eval/func_source_code"
PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
CLASS_MODULES = {
    "GorillaFileSystem": "gorilla_file_system", "MathAPI": "math_api", "MessageAPI": "message_api",
    "TwitterAPI": "posting_api", "TicketAPI": "ticket_api", "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking", "VehicleControlAPI": "vehicle_control",
}
"""BFCL's classes of the multi-turn categories -> their module (BFCL's CLASS_FILE_PATH_MAPPING;
the module name is also the stem of the class's function-doc file in the data)."""
STATELESS = ("MathAPI",)
"""Classes BFCL never gives a scenario (its STATELESS_CLASSES)."""
_SHARED = ("long_context",)
"""Modules the environment modules import from each other."""


@dataclass(frozen=True)
class BfclCode:
    """The environment classes read from one copy of BFCL's code."""

    origin: str
    classes: dict[str, type]
    sha256: dict[str, str]

    def facts(self) -> dict[str, Any]:
        return {"origin": self.origin, "sha256": dict(self.sha256)}


def source_root(path: Path) -> Optional[tuple[str, Path]]:
    """("zip", wheel) or ("dir", the folder holding `bfcl_eval/`) where BFCL's environment modules
    are; None when they are not under `path`."""
    first = f"{SOURCE_DIR}/{CLASS_MODULES['GorillaFileSystem']}.py"
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as wheel:
            return ("zip", path) if first in set(wheel.namelist()) else None
    for root in (path, path / "berkeley-function-call-leaderboard", path.parent, path.parent.parent):
        if (root / first).is_file():
            return "dir", root
    return None


def _sources(where: tuple[str, Path], modules: list[str]) -> dict[str, str]:
    kind, root = where
    names = {m: f"{SOURCE_DIR}/{m}.py" for m in modules}
    try:
        if kind == "zip":
            with zipfile.ZipFile(root) as wheel:
                return {m: wheel.read(n).decode("utf-8") for m, n in names.items()}
        return {m: (root / n).read_text(encoding="utf-8") for m, n in names.items()}
    except (OSError, KeyError, UnicodeDecodeError) as exc:
        raise GradingError(f"cannot read BFCL's environment code from {root} ({exc}); point dataset.bfcl_eval at an "
                           "unmodified copy of BFCL's code (the bfcl_eval wheel, a gorilla checkout or its bfcl_eval "
                           "folder)") from None


_LOADED: dict[tuple[str, str], BfclCode] = {}
_BY_PATH: dict[str, BfclCode] = {}


def load(path: str | Path) -> BfclCode:
    """BFCL's eight environment classes from the copy at `path` (loaded once per copy; a path
    given again is not looked into again: the scorer asks once per sample)."""
    if str(path) not in _BY_PATH:
        _BY_PATH[str(path)] = _load(path)
    return _BY_PATH[str(path)]


def _load(path: str | Path) -> BfclCode:
    where = source_root(Path(path).expanduser())
    if where is None:
        raise GradingError(f"{path}: no {SOURCE_DIR}/ here. BFCL's multi-turn categories run BFCL's own environment "
                           "classes: set dataset.bfcl_eval to the bfcl_eval wheel (make install puts it in "
                           ".venv/share/toolsweep/), a gorilla checkout or its bfcl_eval folder")
    key = (where[0], str(where[1].resolve()))
    if key not in _LOADED:
        sources = _sources(where, [*_SHARED, *sorted(set(CLASS_MODULES.values()))])
        _LOADED[key] = BfclCode(f"{where[1]}" + (" (wheel)" if where[0] == "zip" else ""), _execute(sources, key[1]),
                                {f"{SOURCE_DIR}/{m}.py": hashlib.sha256(s.encode("utf-8")).hexdigest()
                                 for m, s in sources.items()})
    return _LOADED[key]


def _execute(sources: dict[str, str], origin: str) -> dict[str, type]:
    """Run each module's source in its own namespace; a sibling import is answered from ours."""
    modules: dict[str, types.ModuleType] = {}

    def sibling_import(name: str, globals_: Any = None, locals_: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level == 0 and name.startswith(PACKAGE + "."):
            short = name[len(PACKAGE) + 1:]
            if short not in modules:
                raise ImportError(f"BFCL's environment code imports {name}, which toolsweep does not load")
            return modules[short]
        return builtins.__import__(name, globals_, locals_, fromlist, level)

    own_builtins = {**builtins.__dict__, "__import__": sibling_import}
    for name, source in sources.items():
        module = types.ModuleType(f"toolsweep_bfcl_environments.{name}")
        module.__dict__["__builtins__"] = own_builtins
        module.__file__ = f"{origin}/{SOURCE_DIR}/{name}.py"
        try:
            exec(compile(source, module.__file__, "exec"), module.__dict__)  # BFCL's code, from the user's copy
        except Exception as exc:  # noqa: BLE001 - any failure of their module is the copy's fault
            raise GradingError(f"BFCL's {name}.py from {origin} did not load ({type(exc).__name__}: {exc}); point "
                               "dataset.bfcl_eval at an unmodified copy of bfcl-eval 2026.3.23 or a gorilla checkout, "
                               "and check that its imports (e.g. mpmath) are installed") from None
        modules[name] = module
    found = {}
    for class_name, module_name in CLASS_MODULES.items():
        cls = getattr(modules[module_name], class_name, None)
        if not isinstance(cls, type):
            raise GradingError(f"BFCL's {module_name}.py from {origin} has no class {class_name}; point "
                               "dataset.bfcl_eval at a copy of BFCL's code that has the multi-turn environments")
        found[class_name] = cls
    return found
