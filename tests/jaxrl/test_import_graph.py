"""jaxrl's modules import one another in one direction only: no module imports (even inside a function)
a module that imports it back, directly or through others. Shared record types live in their own modules
(`data/problem.py`, `training/rollout.py`) so that this holds."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "jaxrl"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the jaxrl modules it imports anywhere in its body. `from pkg import sub` names the
    submodule, not the package (importing a submodule is no cycle with its package's __init__)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    imported.add(sub if sub in files else node.module)
        graph[name] = {m for m in imported if m in files and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """For each module on a cycle, one path module -> ... -> module."""
    found = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            if start in graph[node]:
                found.append(path + [start])
                break
            for nxt in graph[node] - seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return found


def test_the_graph_sees_function_level_imports():
    graph = import_graph()
    assert "jaxrl.data.cpu_sized" in graph["jaxrl.data.kernelbench"]
    assert "jaxrl.training.rollout" in graph["jaxrl.training.rollout_log"]


def test_no_import_cycle():
    assert cycles(import_graph()) == []
