"""The package graph runs one way: the order documented in ARCHITECTURE.md, checked on
every import, lazy (in-function) ones included, with dotted names.

Each top-level package of brainbot (notes, model, text, …) and each top-level module
(errors, render, cli, …) is a unit with a level; a module may import units of its own
level or a lower one, never a higher one. Modules never import each other in a cycle,
and subpackage ``__init__.py`` files hold nothing but a docstring (no re-exports, so an
import never loads more than it names).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "brainbot"
ROW = re.compile(r"^\| (\d+) \| ([^|]+) \|")


def documented_levels() -> dict[str, int]:
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    levels: dict[str, int] = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            for name in m.group(2).replace("\\_", "_").split(","):
                name = name.strip().strip("`").rstrip("/")
                assert name not in levels, f"{name} is listed twice"
                levels[name] = int(m.group(1))
    return levels


def modules() -> dict[str, Path]:
    """Dotted names relative to brainbot ('store.sqlite.file', 'cli', 'notes')."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def unit_of(module: str) -> str:
    return module.split(".")[0]


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """brainbot modules that module ``name`` imports anywhere in its body (TYPE_CHECKING
    blocks, which never run, excluded)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and "TYPE_CHECKING" in ast.unparse(node.test)
            for b in node.body for n in ast.walk(b)}
    is_package = path.name == "__init__.py" and name != "__init__"
    here = name.split(".") if is_package else name.split(".")[:-1]
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").split(".")[0] == "brainbot":
                target = (node.module or "").removeprefix("brainbot").lstrip(".")
            else:
                continue
            for a in node.names:  # from pkg import module, or a name of pkg
                sub = f"{target}.{a.name}" if target else a.name
                out.add(sub if sub in known else (target or "__init__"))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("brainbot."):
                    out.add(a.name.removeprefix("brainbot."))
    return {m for m in out if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def test_every_unit_is_documented_once():
    levels = documented_levels()
    units = {unit_of(m) for m in modules()}
    assert units - set(levels) == set(), "packages or modules missing from ARCHITECTURE.md"
    assert set(levels) - units == set(), "ARCHITECTURE.md lists units that do not exist"


def test_the_top_level_holds_at_most_eight_modules():
    """The stages live in packages; only the programs' front doors stay at the top."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, top


def test_imports_never_go_up():
    levels = documented_levels()
    upward = [f"{m} ({levels[unit_of(m)]}) imports {d} ({levels[unit_of(d)]})"
              for m, deps in graph().items() for d in sorted(deps)
              if levels[unit_of(d)] > levels[unit_of(m)]]
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


def test_subpackage_inits_hold_only_a_docstring():
    for path in PACKAGE.rglob("__init__.py"):
        if path.parent == PACKAGE:
            continue
        body = ast.parse(path.read_text(encoding="utf-8")).body
        assert all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                   for n in body), f"{path.relative_to(REPO)} does more than document"


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """The checker itself must catch in-function and relative imports, or the tests above
    prove nothing about them."""
    mod = tmp_path / "x.py"
    mod.write_text("def f():\n    from ..search.searcher import Searcher\n"
                   "    from . import agent\n    from brainbot.text import lexical\n")
    known = {"search.searcher", "ask.agent", "ask.x", "text.lexical", "text", "search", "ask"}
    assert imports_of("ask.x", mod, known) == {"search.searcher", "ask.agent", "text.lexical"}


def test_the_two_stores_do_not_import_each_other():
    """store/sqlite and store/pg share code only through store/ (reads.py, interface.py):
    a Postgres process never loads the SQLite store's modules (sqlean, fcntl, the kernel
    arrays), nor the reverse."""
    known = set(modules())
    found = []
    for name, path in modules().items():
        for side, other in (("store.sqlite", "store.pg"), ("store.pg", "store.sqlite")):
            if name.startswith(side + ".") or name == side:
                found += [f"{name} imports {m}" for m in imports_of(name, path, known)
                          if m == other or m.startswith(other + ".")]
    assert not found, found
