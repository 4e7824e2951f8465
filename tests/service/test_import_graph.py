"""The server's import graph (modules under benchdb/, read with ast): no
circle, and nothing running back up from the results app (models, reads,
statistics, tasks) into the API or the pages, which sit above it.

Every import counts, those inside functions too: a function-level import
is a circle postponed, not removed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "benchdb"

# Edges known to close a circle, each with who removes it and when.
KNOWN: set[tuple[str, str]] = set()


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    out = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in mods else base)
        out[name] = {m for m in found if m in mods and m != name} - {
            b for a, b in KNOWN if a == name
        }
    return out


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_circle():
    assert circles(graph()) == []


def test_the_results_app_imports_nothing_from_the_api_or_the_pages():
    upward = [
        f"{a} imports {b}"
        for a, bs in graph().items()
        if a.startswith("benchdb.results")
        for b in sorted(bs)
        if b.startswith(("benchdb.api", "benchdb.web"))
    ]
    assert upward == []


def test_the_graph_sees_imports_inside_functions():
    edges = graph()
    assert "benchdb.results.models" in edges["benchdb.results.ingest"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [
        ["a", "b", "c"]
    ]


def test_migrations_import_no_live_code():
    """A migration runs the same on a fresh database whatever today's code
    says: it imports Django only, and reads models through ``apps``."""
    found = []
    for path in sorted(PACKAGE.glob("*/migrations/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            found += [
                f"{path.relative_to(ROOT)} imports {n}"
                for n in names
                if n.startswith("benchdb")
            ]
    assert found == []
