"""docs/differences.md names its tests: every point of the page ends in ``Tests:`` with at
least one ``path::test_name`` (``[param]`` for one case of a parametrized test), and
every test it names exists, so a renamed or deleted test cannot leave a point unpinned."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "differences.md"
POINTER = re.compile(r"`(tests/[\w/]+\.py)::(\w+)(?:\[([^\]`]+)\])?`")


def points() -> list[str]:
    """The page's bullets, each with its continuation lines."""
    found: list[str] = []
    open_bullet = False
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("- "):
            found.append(line)
            open_bullet = True
        elif line.startswith("  ") and open_bullet:
            found[-1] += "\n" + line
        else:  # a blank line, a heading or a paragraph ends the bullet
            open_bullet = False
    return found


def defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }


def test_every_point_names_its_tests() -> None:
    found = points()
    assert len(found) >= 20
    for point in found:
        assert "Tests: `" in point, point.splitlines()[0]
        assert POINTER.search(point.split("Tests: ", 1)[1]), point.splitlines()[0]


def test_every_test_the_page_names_exists() -> None:
    named = [match for point in points() for match in POINTER.findall(point)]
    assert named
    for path, name, case in named:
        file = ROOT / path
        assert file.is_file(), path
        assert name in defined_tests(file), f"{path}::{name}"
        if case:
            assert f'"{case}"' in file.read_text(encoding="utf-8"), f"{path}::{name}[{case}]"
