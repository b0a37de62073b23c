"""The house rules of rag_core, read from its import graph (every import, inside functions and TYPE_CHECKING too).

- No cycle between packages: `rag_core.chat`, `rag_core.search`, ... and the top-level modules are the nodes.
- The cores never import the Workbench facade, the harnesses above it or the presentation package.
- No file over 500 lines.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "rag_core"
# What sits above the services: the facade, the front-ends, the harnesses that open whole workbenches, and the
# presentation they use. Everything else is a core.
OUTER = {"rag_core", "rag_core.workbench", "rag_core.api", "rag_core.cli", "rag_core.bench", "rag_core.render",
         "rag_core.display"}
ABOVE_CORES = {"rag_core.workbench", "rag_core.bench", "rag_core.render", "rag_core.display", "rag_core.api",
               "rag_core.cli"}
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    """The node a module belongs to: its second-level package (`rag_core.chat`) or top-level module."""
    return ".".join(module.split(".")[:2])


def imports_of(path: Path) -> list[tuple[str, int]]:
    """Every rag_core module a file imports, with the line, wherever the import statement is."""
    module = module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, node.lineno))
            # `from rag_core import workbench` names a module, not an attribute
            found += [(f"{target}.{alias.name}", node.lineno) for alias in node.names]
    return [(name, line) for name, line in found if name == "rag_core" or name.startswith("rag_core.")]


def sources() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "migrations" not in p.parts)


def package_graph() -> dict[str, dict[str, str]]:
    """package -> {imported package: 'file:line' of one import that makes the edge}."""
    existing = {module_name(p) for p in sources()}
    edges: dict[str, dict[str, str]] = defaultdict(dict)
    for path in sources():
        here = package_of(module_name(path))
        for target, line in imports_of(path):
            if target not in existing:
                continue  # an attribute imported from a module (`from rag_core.x import name`)
            there = package_of(target)
            if there != here and here != "rag_core":
                edges[here].setdefault(there, f"{path.relative_to(ROOT.parent)}:{line}")
    return edges


def cycles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(edges):
        if node not in index:
            visit(node)
    return found


def test_no_cycle_between_packages():
    edges = package_graph()
    found = cycles(edges)
    described = [" <-> ".join(c) + ": " + "; ".join(f"{a} -> {b} at {edges[a][b]}" for a in c for b in edges[a]
                                                     if b in c) for c in found]
    assert not found, "Packages import each other (move the shared part down):\n" + "\n".join(described)


def test_cores_never_import_the_facade_or_presentation():
    wrong = []
    for path in sources():
        here = package_of(module_name(path))
        if here in OUTER:
            continue
        for target, line in imports_of(path):
            if package_of(target) in ABOVE_CORES:
                wrong.append(f"{path.relative_to(ROOT.parent)}:{line} imports {target}")
    assert not wrong, ("A core imports the Workbench, a harness or presentation; pass the service it needs "
                       "instead:\n" + "\n".join(wrong))


def test_no_file_over_500_lines():
    long = [f"{p.relative_to(ROOT.parent)}: {n} lines" for p in sources()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not long, f"Split these files by concern (at most {MAX_LINES} lines):\n" + "\n".join(long)


@pytest.mark.parametrize("source, expected", [
    ("import rag_core.workbench\n", ["rag_core.workbench"]),
    ("def f():\n    from rag_core.workbench import Workbench\n", ["rag_core.workbench", "rag_core.workbench.Workbench"]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rag_core import workbench\n",
     ["rag_core", "rag_core.workbench"]),
    ("from ..search import hybrid\n", ["rag_core.search", "rag_core.search.hybrid"]),
])
def test_imports_are_found_wherever_they_are(tmp_path, monkeypatch, source, expected):
    """The rules read imports inside functions, under TYPE_CHECKING and relative ones (a missed one hides a cycle)."""
    package = tmp_path / "rag_core" / "chat"
    package.mkdir(parents=True)
    module = package / "probe.py"
    module.write_text(source, encoding="utf-8")
    monkeypatch.setitem(globals(), "ROOT", tmp_path / "rag_core")
    assert [name for name, _ in imports_of(module)] == expected


def test_a_cycle_is_reported():
    edges = {"rag_core.chat": {"rag_core.search": "a:1"}, "rag_core.search": {"rag_core.chat": "b:2"},
             "rag_core.db": {}}
    assert cycles(edges) == [["rag_core.chat", "rag_core.search"]]


# ----- one verb per operation (docs/architecture.md) -----
DOC = ROOT.parent / "docs" / "architecture.md"
VERB_PREFIXES = ("search", "retrieve")  # the retrieval verbs whose names were reused for other things


def verb_table() -> list[tuple[str, list[str]]]:
    """(verb, owners as module:qualname) of each row of the architecture page's table of verbs."""
    section = DOC.read_text(encoding="utf-8").split("## One verb per operation", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[1].startswith("`"):
            continue
        owners, module = [], ""
        for name in re.findall(r"`([^`]+)`", cells[2]):
            if name.endswith(".py"):
                module = "rag_core." + name[:-3].replace("/", ".")
            elif module:
                owners.append(f"{module}:{name}")
        rows.append((cells[1].strip("`"), owners))
    return rows


def test_each_verb_of_the_table_is_the_workbench_s_and_its_owners_exist():
    from rag_core.workbench import Workbench

    rows = verb_table()
    assert {"search", "retrieve", "retrieve_context", "as_retriever", "chat_append"} <= {v for v, _ in rows}
    for verb, owners in rows:
        assert callable(getattr(Workbench, verb, None)), f"The table names Workbench.{verb}, which does not exist"
        assert owners, f"The row of {verb} names no owning function as `path.py` `name`"
        for owner in owners:
            module, qualname = owner.split(":")
            target: object = importlib.import_module(module)
            for part in qualname.split("."):
                assert hasattr(target, part), f"The table's owner of {verb}, {owner}, does not exist"
                target = getattr(target, part)


def test_no_core_function_is_named_after_a_verb_it_does_not_own():
    """`search_chunks` beside `Workbench.search`, a chat `retrieve` beside `Workbench.retrieve`: a reader took them
    for the public operation. A core's module-level search*/retrieve* function is an owner in the table or the
    core half of a Workbench method of the same name."""
    from rag_core.workbench import Workbench

    owners = {owner.split(":")[1] for _, found in verb_table() for owner in found}
    wrong = []
    for path in sources():
        if package_of(module_name(path)) in OUTER:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.FunctionDef) and node.name.startswith(VERB_PREFIXES)
                    and node.name not in owners and not hasattr(Workbench, node.name)):
                wrong.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.name}")
    assert not wrong, ("Name these after what they do (rank_..., ..._hits), or list them as the owner of a verb in "
                       "docs/architecture.md:\n" + "\n".join(wrong))
