"""Named SQL statements in ``.sql`` files: the loader both SQL backends read their statements with.

A file holds statements under ``-- name: x`` headers and shared pieces under
``-- fragment: x``, included with ``-- include: x`` on a line of their own (see
``a2pg/postgres/sql/README.md``). ``-- name: x@d`` (or ``-- fragment: x@d``) is the
text of ``x`` in dialect ``d`` (PostgreSQL's ``citus``), for the few statements whose one
text cannot serve both. The loader is pure text: rendering (PostgreSQL's schema) and
running are the backends' business.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_HEADER = re.compile(r"^-- (name|fragment): (\w+(?:@\w+)?)[ \t]*$", re.MULTILINE)
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


def load(sources: Mapping[str, str], dialect: str | None = None) -> dict[str, str]:
    """The statements of ``sources`` (file name -> text), their fragments expanded.

    A name is given once across all files; ``-- include: x`` on a line of its own
    stands for fragment ``x``, indented as the marker is. An unknown, unused or
    self-including fragment is an error. With ``dialect``, a statement or fragment
    ``x@dialect`` stands for ``x`` wherever ``x`` is used; a variant of no ``x`` is an
    error, as is a fragment of ``x`` and a statement of its variant.
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
    for name, block in found.items():
        base, at, _ = name.partition("@")
        if at and (base not in found or found[base].kind != block.kind):
            what = "statement" if block.kind == "name" else "fragment"
            raise ValueError(f"{block.source}: {what} {name!r} is a variant of no {what} {base!r}")
    variants = {
        name.partition("@")[0]: block
        for name, block in found.items()
        if dialect is not None and name.endswith(f"@{dialect}")
    }
    fragments = {
        name: variants.get(name, b)
        for name, b in found.items()
        if b.kind == "fragment" and "@" not in name
    }
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

    statements = {
        name: expand(variants.get(name, block), ())
        for name, block in found.items()
        if block.kind == "name" and "@" not in name
    }
    if dialect is None:  # what only a variant includes is used too
        for name, block in found.items():
            if "@" in name:
                expand(block, ())
    for name, fragment in fragments.items():
        if name not in used and name not in variants:
            raise ValueError(f"{fragment.source}: fragment {name!r} is never included")
    return statements


def parse(text: str, source: str = "<text>", dialect: str | None = None) -> dict[str, str]:
    """The statements of one text (see ``load``); each loses its final ``;``."""
    return load({source: text}, dialect)
