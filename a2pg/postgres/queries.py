"""The PostgreSQL store's named SQL statements, loaded once from the ``sql/*.sql`` files."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
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
def _statements() -> dict[str, LiteralString]:
    # The files ship with the package and hold no user input: their text is literal SQL.
    folder = files(__package__).joinpath("sql")
    texts = {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda entry: entry.name)
        if entry.name.endswith(".sql")
    }
    statements: dict[str, LiteralString] = load(texts)
    return statements


def query(name: str) -> LiteralString:
    """The statement called ``name``, ready to execute (placeholders ``%(param)s``)."""
    statements = _statements()
    if name not in statements:
        raise KeyError(f"no SQL statement is named {name!r} in a2pg/postgres/sql")
    return statements[name]


@cache
def claim_any(limit: int) -> bytes:
    """``claim_any`` with its LIMIT as a literal, so PostgreSQL plans for that size: one
    text per limit, rendered once, whose prepared plan is the plan for that limit."""
    statement = sql.SQL(query("claim_any")).format(limit=sql.Literal(limit))
    return statement.as_bytes(None)


def names() -> frozenset[str]:
    """The statements' names (fragments are not statements)."""
    return frozenset(_statements())
