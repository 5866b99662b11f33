"""The store's named SQL statements: read once from ``sql/*.sql``, rendered once per schema."""

from __future__ import annotations

from functools import cache, lru_cache
from importlib.resources import files
from typing import LiteralString

from psycopg import sql

from ..sqlnames import load, parse

__all__ = ["Statements", "load", "names", "parse", "statements", "template"]


@cache
def _templates() -> dict[str, LiteralString]:
    # The files ship with the package and hold no user input: their text is literal SQL.
    folder = files(__package__).joinpath("sql")
    texts = {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda entry: entry.name)
        if entry.name.endswith(".sql")
    }
    statements: dict[str, LiteralString] = load(texts)
    return statements


def template(name: str) -> LiteralString:
    """The text of statement ``name`` as written: ``{schema}`` (and claim_any's
    ``{limit}``) not yet filled in. ``Statements.query`` is what runs."""
    templates = _templates()
    if name not in templates:
        raise KeyError(f"no SQL statement is named {name!r} in a2pg/postgres/sql")
    return templates[name]


def names() -> frozenset[str]:
    """The statements' names (fragments are not statements)."""
    return frozenset(_templates())


LIMITED = "claim_any"
"""The one statement with a literal ``{limit}``: a text per limit (see ``claim_any``)."""

CLAIM_ANY_TEXTS = 64
"""Rendered claim_any texts kept per schema (one per limit a worker asks for)."""


def render(text: LiteralString, schema: str, limit: int | None = None) -> bytes:
    """``text`` with its schema (quoted as an identifier) and, for claim_any, its limit."""
    values: dict[str, sql.Composable] = {"schema": sql.Identifier(schema)}
    if limit is not None:
        values["limit"] = sql.Literal(limit)
    return sql.SQL(text).format(**values).as_bytes(None)


class Statements:
    """Every statement rendered for one schema: each table written ``schema.a2_x``, so
    what runs never depends on the connection's search_path (a transaction-mode
    pooler hands each transaction whichever server connection is free)."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self._rendered = {
            name: render(text, schema) for name, text in _templates().items() if name != LIMITED
        }
        self._claim_any = lru_cache(maxsize=CLAIM_ANY_TEXTS)(self._render_claim_any)

    def query(self, name: str, *, limit: int | None = None) -> bytes:
        """The statement called ``name``, ready to execute (placeholders ``%(param)s``).

        ``claim_any`` takes its LIMIT as a literal, so PostgreSQL plans for that size:
        one text per limit, rendered once, whose prepared plan is the plan for that limit.
        """
        if name == LIMITED:
            if limit is None:
                raise ValueError(f"{LIMITED} needs its limit")
            return self._claim_any(limit)
        if limit is not None:
            raise ValueError(f"{name!r} takes no limit")
        rendered = self._rendered.get(name)
        if rendered is None:
            template(name)  # raises the KeyError that names the statement
            raise AssertionError(name)
        return rendered

    def _render_claim_any(self, limit: int) -> bytes:
        return render(template(LIMITED), self.schema, limit)


@cache
def statements(schema: str) -> Statements:
    """The statements of ``schema``, rendered once per process."""
    return Statements(schema)
