"""The package's import graph has no circle (imports inside functions and under
TYPE_CHECKING count), and synthesizer.py stays a wiring file (issue 29)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rdpgan"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports anywhere in it: ``from rdpgan.a import b`` is
    rdpgan.a.b where that is a module, else rdpgan.a."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [n if n in modules else node.module for n in names]
        else:
            continue
        found.update(n for n in names if n in modules)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imports_of(path, set(paths)) - {name} for name, path in paths.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per back edge met in a depth-first walk."""
    found, state = [], dict.fromkeys(graph, 0)  # 0 new, 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state[nxt] == 1:
                found.append([*path[path.index(nxt) :], nxt])
            elif state[nxt] == 0:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if state[node] == 0:
            visit(node, [node])
    return found


def test_the_package_has_no_import_circle():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_synthesizer_is_a_wiring_file():
    source = (PACKAGE / "synthesizer.py").read_text()
    assert len(source.splitlines()) <= 400
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                lines = node.end_lineno - node.lineno + 1
                assert lines <= 300, f"{path.name}: class {node.name} has {lines} lines"


def test_a_deferred_module_imports_at_first_use_and_copies_without_recursing():
    """rdpgan.deferred: the module is imported at the first attribute read, once, and the
    stand-in survives copy and pickle (their probes are not the module's attributes)."""
    import copy
    import pickle

    from rdpgan.deferred import DeferredModule

    deferred = DeferredModule("json")
    assert deferred._module is None
    assert deferred.dumps([1]) == "[1]" and deferred._module is not None
    for clone in (
        copy.copy(deferred),
        copy.deepcopy(deferred),
        pickle.loads(pickle.dumps(deferred)),
    ):
        assert clone.dumps({}) == "{}"
    fresh = DeferredModule.__new__(DeferredModule)  # as unpickling makes it, before its state
    with pytest.raises(AttributeError):
        getattr(fresh, "_name")  # noqa: B009
