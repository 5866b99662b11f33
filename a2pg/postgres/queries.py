"""The store's named SQL statements: read once from ``sql/*.sql``, rendered once per schema."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib.resources import files
from typing import LiteralString

from psycopg import sql

_HEADER = re.compile(r"^-- (name|fragment): (\w+)[ \t]*$", re.MULTILINE)
_INCLUDE = re.compile(r"^([ \t]*)-- include: (\w+)[ \t]*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class _Block:
    """One ``-- name:`` statement or ``-- fragment:`` piece, and the file it is in."""

    kind: str
    name: str
    body: str
    source: str


def _blocks(text: str, source: str) -> list[_Block]:
    """Splits one file at its headers; only comments may come before the first."""
    parts = _HEADER.split(text)
    if any(line.strip() and not line.lstrip().startswith("--") for line in parts[0].split("\n")):
        raise ValueError(f"{source}: SQL before the first '-- name:' or '-- fragment:' header")
    blocks: list[_Block] = []
    for kind, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        body = body.strip()
        if kind == "name":
            if not body.endswith(";"):
                raise ValueError(f"{source}: statement {name!r} does not end with ';'")
            body = body.removesuffix(";").rstrip()
        elif body.endswith(";"):
            raise ValueError(
                f"{source}: fragment {name!r} ends with ';' (it is part of a statement)"
            )
        if not body:
            what = "statement" if kind == "name" else "fragment"
            raise ValueError(f"{source}: {what} {name!r} is empty")
        blocks.append(_Block(kind, name, body, source))
    return blocks


def load(sources: Mapping[str, str]) -> dict[str, str]:
    """The statements of ``sources`` (file name -> text), their fragments expanded.

    A name is given once across all files; ``-- include: x`` on a line of its own
    stands for fragment ``x``, indented as the marker is. An unknown, unused or
    self-including fragment is an error.
    """
    found: dict[str, _Block] = {}
    for source, text in sources.items():
        for block in _blocks(text, source):
            first = found.get(block.name)
            if first is not None:
                raise ValueError(
                    f"{block.name!r} is named twice: in {first.source} and in {block.source}"
                )
            found[block.name] = block
    fragments = {name: b for name, b in found.items() if b.kind == "fragment"}
    used: set[str] = set()

    def expand(block: _Block, within: tuple[str, ...]) -> str:
        def include(marker: re.Match[str]) -> str:
            indent, name = marker.group(1), marker.group(2)
            fragment = fragments.get(name)
            if fragment is None:
                raise ValueError(
                    f"{block.source}: {block.name!r} includes unknown fragment {name!r}"
                )
            if name in within:
                chain = " -> ".join((*within, name))
                raise ValueError(f"{fragment.source}: fragment {name!r} includes itself ({chain})")
            used.add(name)
            text = expand(fragment, (*within, name))
            return "\n".join(indent + line if line else line for line in text.split("\n"))

        return _INCLUDE.sub(include, block.body)

    statements = {name: expand(block, ()) for name, block in found.items() if block.kind == "name"}
    for name, fragment in fragments.items():
        if name not in used:
            raise ValueError(f"{fragment.source}: fragment {name!r} is never included")
    return statements


def parse(text: str, source: str = "<text>") -> dict[str, str]:
    """The statements of one text (see ``load``); each loses its final ``;``."""
    return load({source: text})


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
