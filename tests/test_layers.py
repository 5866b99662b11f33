"""The package's layers: cli -> worker, demo, bench, dashboard -> backends (the registry)
-> the backends -> the Store protocol.

No module imports from a layer above its own, and the backends know nothing of each
other nor of the worker: every rule they share lives in the contract layer below them.
The outer layers reach a backend through ``a2pg.backends``, and no two modules import
each other, even by way of others.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import a2pg

PACKAGE = pathlib.Path(a2pg.__file__).resolve().parent
"""The package imported: the checkout's, or the installed wheel's (scripts/test-wheel)."""

FACE = frozenset(
    {
        *("models", "errors", "ids", "wakeups", "feeds", "backoff", "store", "front"),
        *("contract", "sqlnames"),
    }
)
"""The package's face: the contract's types, errors, rules and checked front, shared by
everything."""

ALLOWED: dict[str, frozenset[str]] = {
    **{part: FACE for part in FACE},
    "memory": FACE | {"memory"},
    "postgres": FACE | {"postgres"},
    "sqlite": FACE | {"sqlite"},
    "worker": FACE | {"worker"},
    "observability": FACE | {"observability", "worker", "__init__"},
    "backends": FACE | {"backends", "postgres", "sqlite"},
    "demo": FACE | {"demo", "worker", "backends"},
    "bench": FACE | {"bench", "worker", "backends", "postgres", "sqlite"},
    "dashboard": FACE | {"dashboard", "backends"},
    "sync": FACE | {"sync", "backends"},
    "cli": FACE
    | {
        *("cli", "worker", "demo", "bench", "backends", "postgres"),
        *("observability", "dashboard", "__init__"),
    },
    "testing": FACE | {"testing", "postgres", "worker"},
    "__init__": FACE | {"memory", "postgres", "sqlite", "worker"},
}
"""What each part of the package may import (its first component under ``a2pg``)."""


def part_of(path: pathlib.Path) -> str:
    return path.relative_to(PACKAGE).with_suffix("").parts[0]


def imported_parts(path: pathlib.Path) -> set[str]:
    """The first component under ``a2pg`` of every module ``path`` imports."""
    module = path.relative_to(PACKAGE).with_suffix("").parts
    package = module[:-1]  # a module and an __init__ both resolve from their folder
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - (node.level - 1)])
                target = [*base, *(node.module.split(".") if node.module else [])]
                names = [target] if node.module else [[*base, a.name] for a in node.names]
            elif node.module and node.module.split(".")[0] == "a2pg":
                names = [node.module.split(".")[1:]]
            else:
                continue
            found.update(_part(name) for name in names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "a2pg":
                    found.add(parts[1] if len(parts) > 1 else "__init__")
    return found


def _part(name: list[str]) -> str:
    """The part a dotted name under ``a2pg`` lives in; a name of the root's own (like
    ``__version__``) is the root ``__init__``."""
    if not name:
        return "__init__"
    first = name[0]
    is_module = (PACKAGE / first).is_dir() or (PACKAGE / f"{first}.py").is_file()
    return first if is_module else "__init__"


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "_alembic" not in p.parts)


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PACKAGE)) for p in MODULES])
def test_no_module_imports_from_a_layer_above_its_own(path: pathlib.Path) -> None:
    part = part_of(path)
    allowed = ALLOWED.get(part)
    assert allowed is not None, f"{part} is not placed in a layer: add it to ALLOWED"
    forbidden = imported_parts(path) - allowed
    assert not forbidden, f"a2pg/{path.relative_to(PACKAGE)} imports {sorted(forbidden)}"


def test_the_package_root_holds_only_its_face_and_subpackages() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules == {"__init__", "backends", "sync"} | (FACE - {"contract"})
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages == {
        *("contract", "memory", "postgres", "sqlite", "worker", "cli", "demo", "bench"),
        *("observability", "dashboard", "testing"),
    }


def test_the_checker_sees_relative_and_absolute_imports(tmp_path: pathlib.Path) -> None:
    """The scan itself: a test that cannot fail is a defect."""
    sample = PACKAGE / "worker" / "runtime.py"
    assert {"store", "models", "worker"} <= imported_parts(sample)
    assert "cli" not in imported_parts(sample)
    registry = PACKAGE / "backends.py"
    assert {"postgres", "sqlite", "errors"} <= imported_parts(registry)


# -- no circles -------------------------------------------------------------------------


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMES = {module_name(p): p for p in MODULES}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import that runs: at module level or deferred into a function, never one
    under ``if TYPE_CHECKING:`` (only the type checker reads those)."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and _type_checking(node):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))
    return found


def _module(dotted: str) -> str | None:
    """The a2pg module a dotted name is, or the one it is a name of."""
    while dotted and dotted not in NAMES:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def imported_modules(path: pathlib.Path) -> set[str]:
    """The a2pg modules ``path`` runs imports of (``from pkg import sub`` is ``pkg.sub``
    when ``sub`` is a module, else ``pkg``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and node.module.split(".")[0] == "a2pg":
                source = node.module
            else:
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.add(sub if sub in NAMES else source)
        else:
            found.update(a.name for a in node.names if a.name.split(".")[0] == "a2pg")
    return {m for m in map(_module, found) if m is not None and m != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` (``[a, b, a]``: a imports b imports a), if it has any."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path = [start]
        stack = [iter(sorted(graph.get(start, ())))]
        while stack:
            following = next(stack[-1], None)
            if following is None:
                stack.pop()
                done.add(path.pop())
            elif following in path:
                return [*path[path.index(following) :], following]
            elif following not in done:
                path.append(following)
                stack.append(iter(sorted(graph.get(following, ()))))
    return None


def test_no_modules_import_each_other_even_by_way_of_others() -> None:
    """A circle makes import order matter and hides a layer inside another; a deferred
    import (inside a function) closes a circle as surely as one at the top."""
    graph = {name: imported_modules(path) for name, path in NAMES.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "an import circle: " + " -> ".join(cycle or [])


def test_the_circle_checker_sees_deferred_imports_and_circles() -> None:
    """The scan and the search themselves: a test that cannot fail is a defect."""
    common = imported_modules(PACKAGE / "cli" / "common.py")
    assert "a2pg.postgres.embedded" in common  # imported inside a function
    assert "a2pg.backends" in common  # ``from .. import backends``: the module
    assert "a2pg.store" not in common  # under TYPE_CHECKING only
    assert "a2pg.postgres.connect" in imported_modules(PACKAGE / "postgres" / "backend.py")
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
