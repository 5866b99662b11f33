"""The SQLite store's named SQL statements, read once from ``sql/*.sql``.

The same format as the PostgreSQL store's (``a2pg.sqlnames``): ``-- name:`` statements
and ``-- fragment:`` pieces; parameters are sqlite3's named ``:param`` style. Tables
are plain ``a2_x``: a SQLite file is its own namespace.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from ..sqlnames import load


@cache
def _statements() -> dict[str, str]:
    folder = files(__package__).joinpath("sql")
    texts = {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda entry: entry.name)
        if entry.name.endswith(".sql")
    }
    return load(texts)


def statement(name: str) -> str:
    """The statement called ``name``, ready to execute."""
    statements = _statements()
    if name not in statements:
        raise KeyError(f"no SQL statement is named {name!r} in a2pg/sqlite/sql")
    return statements[name]


def names() -> frozenset[str]:
    return frozenset(_statements())
