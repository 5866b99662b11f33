"""The package's layers: cli -> worker, demo, bench, dashboard -> the Store protocol <- backends.

No module imports from a layer above its own, and the backends know nothing of each
other nor of the worker: every rule they share lives in the contract layer below them.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "a2pg"

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
    "demo": FACE | {"demo", "worker", "postgres", "sqlite"},
    "bench": FACE | {"bench", "worker", "postgres", "sqlite"},
    "dashboard": FACE | {"dashboard"},
    "cli": FACE
    | {
        *("cli", "worker", "demo", "bench", "postgres", "sqlite"),
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
    assert modules == {"__init__"} | (FACE - {"contract"})
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
    cli = PACKAGE / "cli" / "admin.py"
    assert "postgres" in imported_parts(cli)
