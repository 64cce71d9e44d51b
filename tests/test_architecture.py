"""The module graph runs one way: the layer order documented in ARCHITECTURE.md, checked
on every import, lazy (in-function) ones included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "brainbot"
ROW = re.compile(r"^\| (\d+) \| ([^|]+) \|")


def documented_layers() -> dict[str, int]:
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    layers: dict[str, int] = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            for name in m.group(2).replace("\\_", "_").split(","):
                assert name.strip() not in layers, f"{name.strip()} is listed twice"
                layers[name.strip()] = int(m.group(1))
    return layers


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """brainbot modules that ``path`` imports anywhere in its body (TYPE_CHECKING blocks,
    which never run, excluded)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and "TYPE_CHECKING" in ast.unparse(node.test)
            for b in node.body for n in ast.walk(b)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            relative = node.level == 1 or (node.module or "").startswith("brainbot")
            if not relative:
                continue
            module = (node.module or "").removeprefix("brainbot").lstrip(".")
            if module:
                out.add(module.split(".")[0])
            else:  # from . import x: a module, or a name of the package's __init__
                out.update(a.name if a.name in modules else "__init__" for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("brainbot."):
                    out.add(a.name.split(".")[1])
    out.discard(path.stem)
    return {m for m in out if m in modules}


def graph() -> dict[str, set[str]]:
    paths = {p.stem: p for p in PACKAGE.glob("*.py")}
    return {name: imports_of(path, set(paths)) for name, path in paths.items()}


def test_every_module_is_documented_once():
    layers = documented_layers()
    modules = set(graph())
    assert modules - set(layers) == set(), "modules missing from ARCHITECTURE.md"
    assert set(layers) - modules == set(), "ARCHITECTURE.md lists modules that do not exist"


def test_imports_never_go_up_a_layer():
    layers = documented_layers()
    upward = [f"{m} (layer {layers[m]}) imports {d} (layer {layers[d]})"
              for m, deps in graph().items() for d in sorted(deps) if layers[d] > layers[m]]
    assert upward == []


def test_no_import_cycles():
    g = graph()
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in sorted(g[node]):
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join(trail + [node, dep]))
            if dep not in state:
                visit(dep, trail + [node])
        state[node] = 2

    for module in sorted(g):
        if module not in state:
            visit(module, [])


def test_the_checker_sees_lazy_imports(tmp_path):
    """The checker itself must catch an in-function import, or the tests above prove
    nothing about lazy imports."""
    mod = tmp_path / "x.py"
    mod.write_text("def f():\n    from .search import Searcher\n    from . import agent\n")
    assert imports_of(mod, {"search", "agent", "x"}) == {"search", "agent"}
