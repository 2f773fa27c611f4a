"""No import cycles among the project's modules (module-level and function-level imports alike)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("inference", "grading")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(name: str, modules: set[str], importer: str) -> list[str]:
    # `import a.b.c` runs a, a.b and a.b.c: each existing one is an edge, except the importer's own
    # packages, which already ran (a module of a package importing its sibling is no cycle); the
    # module named itself is always an edge.
    parts = name.split(".")
    found = [m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if m in modules]
    return [m for m in found if m == found[-1] or not importer.startswith(m + ".")]


def _absolute(module: str, path: Path, level: int, name: str | None) -> str:
    """The absolute module a `from ... import` names: `from .x import y` in a.b.c is a.b.x."""
    if level == 0:
        return name or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[:len(package) - (level - 1)]
    return ".".join([*base, *([name] if name else [])])


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports anywhere in its source."""
    files = {_module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    modules = set(files)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, path, node.level, node.module)
                subs = [f"{base}.{a.name}" for a in node.names]
                # `from pkg import mod` imports the module; pkg itself only for a name defined in it
                names = [*([base] if any(s not in files for s in subs) else []), *subs]
            else:
                continue
            for name in names:
                graph[module].update(m for m in _resolve(name, modules, module) if m != module)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 30, "the scan found the project's modules"
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_grading_never_imports_inference():
    graph = import_graph()
    leaks = {m: sorted(d for d in deps if d.startswith("inference")) for m, deps in graph.items()
             if m.startswith("grading")}
    assert {m: d for m, d in leaks.items() if d} == {}


def test_relative_imports_are_followed():
    graph = import_graph()
    assert "inference.benchmarks.etapp.agent" in graph["inference.benchmarks.etapp.agent_solver"]
    assert "inference.benchmarks.etapp.options" in graph["inference.benchmarks.etapp"]


# The run's layers, top down: the entry points, then the benchmarks (loaders and their solvers),
# then everything they are built from. Nothing below the benchmarks imports them.
ENTRY = {"inference.cli", "inference.verbs", "inference.run", "inference.rejudge", "inference.regrade", "inference.gold"}


def test_nothing_below_the_benchmarks_imports_them():
    graph = import_graph()
    upward = {m: sorted(d for d in deps if d.startswith("inference.benchmarks")) for m, deps in graph.items()
              if not m.startswith("inference.benchmarks") and m not in ENTRY}
    assert {m: d for m, d in upward.items() if d} == {}
