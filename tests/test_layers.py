"""The import structure: no circle between judgekit's modules, and the judge package sits below
the run (it knows how to reach a judge, never what a run is)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "judgekit"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """judgekit modules ``path`` imports anywhere (function bodies too), TYPE_CHECKING blocks aside."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(child) for child in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != "judgekit":
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(files)
    return {name: imports_of(path, known) - {name} for name, path in files.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_through_others():
    assert circles(graph()) == []


def within(module: str, places: tuple[str, ...]) -> bool:
    return any(module == place or module.startswith(place + ".") for place in places)


def test_the_judge_package_knows_nothing_of_runs_caches_gates_or_the_cli():
    above = ("judgekit.run", "judgekit.cache", "judgekit.gate", "judgekit.calibration", "judgekit.cli",
             "judgekit.axes", "judgekit.checks", "judgekit.suite", "judgekit.rubric", "judgekit.prompt")
    edges = graph()
    wrong = {module: sorted(t for t in targets if within(t, above))
             for module, targets in edges.items() if within(module, ("judgekit.judge",))}
    assert {m: t for m, t in wrong.items() if t} == {}


def test_the_run_package_is_below_the_cli_and_reporting():
    edges = graph()
    wrong = {module: sorted(t for t in targets if within(t, ("judgekit.cli", "judgekit.importers")))
             for module, targets in edges.items() if within(module, ("judgekit.run",))}
    assert {m: t for m, t in wrong.items() if t} == {}


def test_the_plumbing_imports_nothing_of_judgekit_but_its_errors():
    edges = graph()
    above = {name: sorted(imported - {"judgekit.errors"} - {m for m in imported if m.startswith("judgekit._util")})
             for name, imported in edges.items() if name.startswith("judgekit._util")}
    assert {name: found for name, found in above.items() if found} == {}


def test_the_suite_and_its_safety_policy_import_nothing_of_the_scan():
    edges = graph()
    up = {name: sorted(m for m in imported if m.startswith("judgekit.safety"))
          for name, imported in edges.items() if name == "judgekit.suite" or name.startswith("judgekit.suite.")}
    assert {name: found for name, found in up.items() if found} == {}
