"""The import structure: no circle between judgekit's modules or packages, every package in its
declared layer (``LAYERS``) and importing only from the layers below, a short top level, and no
module long enough to hold several jobs."""

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


LAYERS: tuple[tuple[str, ...], ...] = (
    # Lowest first. A package (or top-level module) imports only from layers below its own, never
    # from its own layer or above: the flow reads top-down, and a new arrow back up fails here.
    ("errors", "prompts"),
    ("_util",),                                   # reading, writing, documents, text, secrets, clock
    ("runtime",),                                 # process set-up
    ("judge", "verdict", "world", "testing"),     # reaching a judge; what it says; snapshots and diff
    ("schemas",),                                 # the format registry: names its models as strings
    ("rubric", "trajectory", "results", "cache"),
    ("prompt", "suite"),
    ("axes",),                                    # the axes: scorers, prompt sections, verdict -> result
    ("calibration",),                             # consumes verdicts only
    ("gate",),
    ("run",),                                     # plan, ask, execute, merge, record
    ("report", "export", "importers", "scaffold"),  # a run's reports and events; other tools' runs in; init
    ("ci",),                                      # after a run: history, compare, the loop
    ("safety", "pytest_plugin"),
    ("cli",),
    ("__main__",),
)
"""The declared order of judgekit's packages and top-level modules (``judgekit.`` left out).
``judgekit/__init__.py`` is the facade over all of them: it names its exports as strings and
loads them lazily, so it imports none of them."""

MAX_TOP_LEVEL_MODULES = 12
MAX_MODULE_LINES = 500
"""A module longer than this holds more than one job; one-format importers aside."""


def place(module: str) -> str:
    """The package or top-level module ``module`` belongs to (``judgekit.run.plan`` -> ``run``)."""
    return module.split(".")[1] if module.count(".") >= 1 else ""


def tiers() -> dict[str, int]:
    return {name: tier for tier, names in enumerate(LAYERS) for name in names}


def test_every_package_and_top_level_module_has_a_declared_layer():
    places = {place(module) for module in graph()} - {""}
    assert sorted(places - set(tiers())) == []
    assert sorted(set(tiers()) - places) == []


def test_no_import_runs_to_the_same_layer_or_up():
    tier = tiers()
    up = sorted(f"{module} -> {target}" for module, targets in graph().items() for target in targets
                if place(module) and place(target) and place(module) != place(target)
                and tier[place(target)] >= tier[place(module)])
    assert up == []


def test_no_package_imports_itself_through_others():
    packages: dict[str, set[str]] = {}
    for module, targets in graph().items():
        packages.setdefault(place(module), set()).update(place(t) for t in targets if place(t) != place(module))
    assert circles(packages) == []


def test_the_top_level_holds_the_flow_steps_only():
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules


def test_no_module_holds_several_jobs():
    importers = PACKAGE / "importers"
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
            and not (p.parent == importers and not p.name.startswith("_"))}
    assert long == {}
