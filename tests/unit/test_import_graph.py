"""The package's import graph: no cycles anywhere, and the core never reaches into the UI.

Read statically from the source (every `import`, including those under `TYPE_CHECKING` and inside
functions: a lazy import back into a module that imports you is still a circle, only a hidden one).
"""

from __future__ import annotations

import ast
from pathlib import Path

import cockpit

ROOT = Path(cockpit.__file__).parent


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the cockpit modules it imports (any import statement anywhere in its file)."""
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    packages = {module_name(p, root) for p in root.rglob("__init__.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        edges: set[str] = set()
        package = name if name in packages else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    child = f"{base}.{alias.name}"
                    targets.append(child if child in files else base)
            for target in targets:
                # `import cockpit.core.x` names the module itself; an attribute of it, its module.
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name and target.startswith("cockpit"):
                    edges.add(target)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_cycle_and_relative_imports(tmp_path: Path) -> None:
    package = tmp_path / "cockpit"
    (package / "ui").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "ui" / "__init__.py").write_text("")
    (package / "ui" / "app.py").write_text("from cockpit.ui.screen import Screen\n")
    (package / "ui" / "screen.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .app import App\n"
    )
    graph = import_graph(package)
    assert graph["cockpit.ui.screen"] == {"cockpit.ui.app"}
    assert cycles(graph) == [["cockpit.ui.app", "cockpit.ui.screen"]]


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the whole package was read
    assert cycles(graph) == []


def test_core_never_imports_the_ui() -> None:
    graph = import_graph()
    offenders = {
        module: sorted(t for t in targets if t.startswith("cockpit.ui"))
        for module, targets in graph.items()
        if module.startswith("cockpit.core")
    }
    assert {m: t for m, t in offenders.items() if t} == {}


def test_screens_never_import_the_app() -> None:
    graph = import_graph()
    screens = [
        m for m in graph if m.startswith(("cockpit.ui.screens", "cockpit.ui.widgets", "cockpit.ui.feeds"))
    ]
    assert screens
    assert [m for m in screens if "cockpit.ui.app" in graph[m]] == []
