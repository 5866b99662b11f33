"""The store's named SQL statements: read once from ``sql/*.sql``, rendered once per schema."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib.resources import files
from typing import Any, Literal, LiteralString

from psycopg import sql

from ..sqlnames import load, parse

__all__ = [
    "CITUS_ONLY",
    "DIALECTS",
    "Dialect",
    "OffGroup",
    "Positional",
    "Statements",
    "load",
    "names",
    "parse",
    "statements",
    "template",
]


Dialect = Literal["citus"]
DIALECTS: tuple[Dialect, ...] = ("citus",)
"""The variants the files hold (``-- name: x@citus``): a store on a database whose tables
Citus distributes runs those where they differ (``a2pg/postgres/citus.py``)."""


@cache
def _templates(dialect: Dialect | None = None) -> dict[str, LiteralString]:
    # The files ship with the package and hold no user input: their text is literal SQL.
    folder = files(__package__).joinpath("sql")
    texts = {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda entry: entry.name)
        if entry.name.endswith(".sql")
    }
    statements: dict[str, LiteralString] = load(texts, dialect)
    return statements


def template(name: str, dialect: Dialect | None = None) -> LiteralString:
    """The text of statement ``name`` as written: ``{schema}`` (and the claim's
    ``{limit}``) not yet filled in. ``Statements.query`` is what runs."""
    templates = _templates(dialect)
    if name not in templates:
        raise KeyError(f"no SQL statement is named {name!r} in a2pg/postgres/sql")
    return templates[name]


def names() -> frozenset[str]:
    """The statements' names (fragments are not statements)."""
    return frozenset(_templates())


CITUS_ONLY = frozenset({"notify_sessions", "session_shard"})
"""The statements that call Citus's own functions: run by a store on Citus alone (they
do not parse on plain PostgreSQL)."""

LIMITED = frozenset({"complete_and_claim"})
"""The statements with a literal ``{limit}`` (the claim's): a text per limit (see ``query``)."""

LIMITED_TEXTS = 64
"""Rendered texts kept per schema and limited statement (one per limit a worker asks for)."""


_TOKENS = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|\s+|[^'"\s-]+|-""")


def compact(text: LiteralString) -> LiteralString:
    """``text`` without its comments and with each run of blanks one space: what runs.

    psycopg caches the parse of a query's placeholders only for texts of up to 4,096
    bytes, and a shorter text costs less to send and to parse on the server.
    Quoted strings and identifiers are kept as they are.
    """
    parts: list[str] = []
    for token in _TOKENS.findall(text):
        if token.startswith("--"):
            continue
        if token.isspace():
            if parts and parts[-1] != " ":
                parts.append(" ")
            continue
        parts.append(token)
    compacted: LiteralString = "".join(parts).strip()
    return compacted


def render(text: LiteralString, schema: str, limit: int | None = None) -> bytes:
    """``text`` with its schema (quoted as an identifier) and, for the claim, its limit,
    compacted (``compact``)."""
    # A % in the schema's name (PostgreSQL allows it) would read as a placeholder: it is
    # doubled, which psycopg's parse (and ``Positional``) turn back into one.
    quoted = sql.Identifier(schema).as_bytes(None).decode().replace("%", "%%")
    values: dict[str, sql.Composable] = {"schema": sql.SQL(quoted)}
    if limit is not None:
        values["limit"] = sql.Literal(limit)
    return sql.SQL(compact(text)).format(**values).as_bytes(None)


_PLACEHOLDER = re.compile(rb"%\((\w+)\)s")
_UNNESTED = re.compile(rb"pg_catalog\.unnest\(%\((\w+)\)s")


@dataclass(frozen=True, slots=True)
class Positional:
    """A statement with PostgreSQL's own ``$n`` placeholders and the parameter each stands
    for: run on a raw cursor, psycopg sends it as it is, with no placeholder parse per
    call (which it caches only for texts of up to 4,096 bytes). For the hot statements."""

    text: bytes
    names: tuple[str, ...]
    statement: str = ""
    """The name of the statement it is (``Statements.positional`` says)."""
    limit: int | None = None

    @classmethod
    def of(cls, rendered: bytes, statement: str = "", limit: int | None = None) -> Positional:
        names: dict[str, int] = {}

        def number(match: re.Match[bytes]) -> bytes:
            name = match.group(1).decode()
            return b"$%d" % names.setdefault(name, len(names) + 1)

        # A doubled % (in a schema's name, see ``render``) is one % in what runs.
        text = b"%".join(_PLACEHOLDER.sub(number, part) for part in rendered.split(b"%%"))
        return cls(text, tuple(names), statement, limit)

    def values(self, params: Mapping[str, Any]) -> list[Any]:
        """``params`` in placeholder order."""
        return [params[name] for name in self.names]


class Statements:
    """Every statement rendered for one schema: each table written ``schema.a2_x``, so
    what runs never depends on the connection's search_path (a transaction-mode
    pooler hands each transaction whichever server connection is free)."""

    def __init__(
        self,
        schema: str,
        dialect: Dialect | None = None,
        rewrite: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self.schema = schema
        self.dialect = dialect
        self._rewrite = rewrite
        """Applied to each rendered text (on Citus: a shard group's tables named as its
        shards, ``Shards.statements``); a text it refuses with ``KeyError`` names a
        table outside the group, and ``query`` raises ``OffGroup`` for it."""
        self._off: set[str] = set()
        self._rendered: dict[str, bytes] = {}
        for name, written in _templates(dialect).items():
            if name in LIMITED:
                continue
            try:
                self._rendered[name] = self._rewritten(render(written, schema))
            except KeyError:
                self._off.add(name)
        self._limited = lru_cache(maxsize=LIMITED_TEXTS * len(LIMITED))(self._render_limited)
        self._positional: dict[tuple[str, int | None], Positional] = {}
        self._parallel: dict[bytes, frozenset[str]] = {}
        if dialect == "citus":
            for text in self._rendered.values():
                if b"%(session_ids)s" in text:
                    unnested = _UNNESTED.findall(text)
                    self._parallel[text] = frozenset(
                        name.decode() for name in (*unnested, b"session_ids")
                    )

    def by_session(self, statement: bytes, params: dict[str, Any]) -> list[dict[str, Any]]:
        """On Citus, ``params`` of a statement over several sessions (``session_ids`` and
        the arrays unnested beside it) one session at a time, in order, each with its
        ``session_id``: Citus refuses (or routes through the coordinator) a statement over
        several shards that it runs on one shard where the shard is. Else ``[params]``."""
        parallel = self._parallel.get(statement)
        if parallel is None:
            return [params]
        ids: list[str] = params["session_ids"]
        rows: dict[str, list[int]] = {}
        for row, session_id in enumerate(ids):
            rows.setdefault(session_id, []).append(row)
        if len(rows) <= 1:  # none: a statement of no session (it finds nothing)
            return [{**params, "session_id": ids[0] if ids else None}]
        # An unnested array shorter than the rest (trace_parents) is padded with nulls.
        padded = {
            name: [*params[name], *([None] * (len(ids) - len(params[name])))]
            for name in parallel
            if name in params
        }
        return [
            {
                **params,
                **{name: [values[i] for i in picked] for name, values in padded.items()},
                "session_id": session_id,
            }
            for session_id, picked in sorted(rows.items())
        ]

    def query(self, name: str, *, limit: int | None = None) -> bytes:
        """The statement called ``name``, ready to execute (placeholders ``%(param)s``).

        ``complete_and_claim`` (which is also ``claim_any``) takes its LIMIT as a
        literal, so PostgreSQL plans for that size: one text per limit, rendered once,
        whose prepared plan is the plan for that limit.
        """
        if name in LIMITED:
            if limit is None:
                raise ValueError(f"{name} needs its limit")
            return self._limited(name, limit)
        if limit is not None:
            raise ValueError(f"{name!r} takes no limit")
        if name in self._off:
            raise OffGroup(name)
        rendered = self._rendered.get(name)
        if rendered is None:
            template(name)  # raises the KeyError that names the statement
            raise AssertionError(name)
        return rendered

    def positional(self, name: str, *, limit: int | None = None) -> Positional:
        """Statement ``name`` with ``$n`` placeholders (see ``Positional``), made once."""
        key = (name, limit)
        found = self._positional.get(key)
        if found is None:
            found = Positional.of(self.query(name, limit=limit), name, limit)
            if len(self._positional) < LIMITED_TEXTS * 4:
                self._positional[key] = found
        return found

    def _render_limited(self, name: str, limit: int) -> bytes:
        return self._rewritten(render(template(name, self.dialect), self.schema, limit))

    def _rewritten(self, text: bytes) -> bytes:
        return text if self._rewrite is None else self._rewrite(text)


class OffGroup(LookupError):
    """A statement that reads or writes a table outside one shard group (``Statements``
    with a ``rewrite``): the transaction cannot run on the group's node alone."""


@cache
def statements(schema: str, dialect: Dialect | None = None) -> Statements:
    """The statements of ``schema`` (in ``dialect``), rendered once per process."""
    return Statements(schema, dialect)
