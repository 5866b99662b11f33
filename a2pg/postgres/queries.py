"""The PostgreSQL store's named SQL statements, loaded once from ``sql/queries.sql``."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from typing import LiteralString

from psycopg import sql

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """Splits the file at its ``-- name: x`` headers; each statement loses its final ``;``."""
    parts = _HEADER.split(text)
    statements: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in statements:
            raise ValueError(f"queries.sql names {name!r} twice")
        statements[name] = body.strip().rstrip(";").strip()
    return statements


@cache
def _statements() -> dict[str, LiteralString]:
    # The file ships with the package and holds no user input: its text is literal SQL.
    text = files(__package__).joinpath("sql", "queries.sql").read_text(encoding="utf-8")
    statements: dict[str, LiteralString] = parse(text)
    return statements


def query(name: str) -> LiteralString:
    """The statement called ``name``, ready to execute (placeholders ``%(param)s``)."""
    return _statements()[name]


@cache
def claim_any(limit: int) -> bytes:
    """``claim_any`` with its LIMIT as a literal, so PostgreSQL plans for that size: one
    text per limit, rendered once, whose prepared plan is the plan for that limit."""
    statement = sql.SQL(_statements()["claim_any"]).format(limit=sql.Literal(limit))
    return statement.as_bytes(None)


def names() -> frozenset[str]:
    return frozenset(_statements())
