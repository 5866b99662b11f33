"""Statement texts as the code builds them: schema-qualified, pg_catalog's functions only,
claim_any's per-limit texts and their plan (``test_queries.py`` checks that every
statement the code names exists)."""

from __future__ import annotations

import re

import psycopg
import pytest

from a2pg.postgres import PostgresStore, queries
from tests.postgres.support import work

ODD_SCHEMA = 'Odd "Schema"'

SYNTAX = frozenset(
    {
        # Keywords a parenthesis may follow; none of them calls a function.
        *("all", "and", "any", "array", "as", "by", "case", "cast", "coalesce", "conflict"),
        *("distinct", "else", "exists", "extract", "filter", "from", "greatest", "in"),
        *("is", "join", "lateral", "least", "not", "nullif", "on", "or", "over", "returning"),
        *("row", "rows", "select", "then", "using", "values", "when", "where", "with"),
    }
)
"""Words before ``(`` that are SQL syntax, not a call: ``coalesce``, ``array(...)``..."""

_COMMENT = re.compile(r"--[^\n]*")
_STRING = re.compile(r"'(?:[^']|'')*'")
_NAME = r'"(?:[^"]|"")*"|\w+'
_TABLE = re.compile(rf"(?:({_NAME})\s*\.\s*)?\b(a2_\w+)")
_CALL = re.compile(rf"(?:({_NAME})\s*\.\s*)?\b([A-Za-z_]\w*)\s*\(")
_AFTER_AS = re.compile(r"\bas\s*$", re.IGNORECASE)


def quoted(schema: str) -> str:
    return '"' + schema.replace('"', '""') + '"'


def unqualified(text: str, schema: str) -> list[str]:
    """What in ``text`` depends on the search_path: an ``a2_`` table not written
    ``<schema>.a2_x``, a function call not written ``pg_catalog.f(...)``."""
    code = _STRING.sub("''", _COMMENT.sub("", text))
    ident = quoted(schema)
    found = [
        f"table {m.group(2)}" for m in _TABLE.finditer(code) if m.group(1) not in (ident, schema)
    ]
    for m in _CALL.finditer(code):
        qualifier, name = m.group(1), m.group(2)
        if qualifier == "pg_catalog":
            continue
        if qualifier is not None:
            if not (name.startswith("a2_") and qualifier in (ident, schema)):
                found.append(f"call {qualifier}.{name}")  # insert column lists aside
            continue
        if name.lower() in SYNTAX or _AFTER_AS.search(code, 0, m.start()):
            continue  # syntax, or a column list after an alias (`as k (a, b)`)
        found.append(f"call {name}")
    return found


def test_the_check_finds_what_leans_on_the_search_path() -> None:
    leaning = (
        "select now(), count(*), public.json_typeof(x.v), pg_catalog.max(x.i)\n"
        '  from a2_events e join "Odd ""Schema""".a2_cursors c on true\n'
        "  join unnest(%(a)s::text[], %(b)s::text[]) as k (a, b) on true -- count(a2_meta)\n"
        " where e.t = 'now()' and exists (select 1 from other.a2_sessions)"
    )
    assert unqualified(leaning, ODD_SCHEMA) == [
        "table a2_events",
        "table a2_sessions",
        "call now",
        "call count",
        "call public.json_typeof",
        "call unnest",
    ]
    clean = (
        'insert into "Odd ""Schema""".a2_events as e (a, b)\n'
        "select coalesce(pg_catalog.now(), x), array(select 1), k.a = any(%(a)s::text[])\n"
        '  from rows from (pg_catalog.unnest(%(a)s::text[])) as k (a) join "Odd ""Schema""".'
        "a2_cursors c on (c.a = k.a)"
    )
    assert unqualified(clean, ODD_SCHEMA) == []


@pytest.mark.parametrize("dialect", [None, *queries.DIALECTS])
def test_every_statement_names_its_schema_and_pg_catalog_functions(
    dialect: queries.Dialect | None,
) -> None:
    statements = queries.statements(ODD_SCHEMA, dialect)
    texts = {
        name: statements.query(name, limit=10 if name in queries.LIMITED else None).decode()
        for name in sorted(queries.names())
    }
    for name, text in texts.items():
        assert unqualified(text, ODD_SCHEMA) == [], name
    without_tables = {name for name, text in texts.items() if '"Odd ""Schema""".a2_' not in text}
    # The Citus-only statements name their table as a parameter (a regclass): notify_sessions
    # sends the payloads a Citus statement returned, session_shard asks for a session's shard.
    assert without_tables == {"probe_connected", "server_now", *queries.CITUS_ONLY}


def test_statements_are_rendered_once_per_schema() -> None:
    assert queries.statements(ODD_SCHEMA) is queries.statements(ODD_SCHEMA)
    public, odd = queries.statements("public"), queries.statements(ODD_SCHEMA)
    assert public.query("read_events") is public.query("read_events")
    assert b'from "public".a2_events' in public.query("read_events")
    assert b'from "Odd ""Schema""".a2_events' in odd.query("read_events")


def _numbered(text: str) -> tuple[str, list[str]]:
    """``%(name)s`` placeholders as ``$n`` (for PREPARE), and the names in order."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    return re.sub(r"%\((\w+)\)s", number, text), order


@pytest.mark.postgres
async def test_claim_any_scans_the_ready_index_even_with_a_generic_plan(
    store: PostgresStore, postgres_dsn: str
) -> None:
    for s in range(200):
        await store.append(f"s{s:03d}", work(10), consumers=[])
    statement = queries.statements("public").query("complete_and_claim", limit=10)
    text, names = _numbered(statement.decode())
    values = {"now": "null", "holder": "'h'", "ttl": "'30 seconds'", "max_failures": "null"}
    values |= {"names": "null", "done": "'[]'", "refresh": "'[]'", "count": "0"}
    args = ", ".join(values[name] for name in names)
    async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
        await conn.execute("analyze")
        await conn.execute("set plan_cache_mode = force_generic_plan")
        await conn.execute(f"prepare claim as {text}".encode())
        await conn.execute("begin")
        cur = await conn.execute(f"explain execute claim({args})".encode())
        plan = "\n".join(row[0] for row in await cur.fetchall())
        await conn.execute("rollback")
    # The pick of ready heads must walk the ready_at index. At this small size (2,000
    # cursors) the planner may join the UPDATE back by a seq scan, a legitimate choice
    # that made this test flaky; test_plans.py checks the whole statement at 10,000.
    picked = plan.split("CTE picked", 1)[1].split("CTE claimed", 1)[0]
    assert "Index Scan using a2_cursors_ready on a2_cursors" in picked, plan
    assert "Seq Scan" not in picked, plan


def test_claim_any_texts_are_one_per_limit() -> None:
    public = queries.statements("public")
    claim = "complete_and_claim"
    assert public.query(claim, limit=10) is public.query(claim, limit=10)
    assert b" limit 10 " in public.query(claim, limit=10)
    assert b" limit 50 " in public.query(claim, limit=50)
    assert public.positional(claim, limit=10) is public.positional(claim, limit=10)
