"""The named SQL statements: every one called, every name called defined, fragments, parsing."""

from __future__ import annotations

import ast
import pathlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import psycopg
import pytest

import a2pg
from a2pg import NewEvent, Target
from a2pg.postgres import PostgresStore, queries
from a2pg.postgres.migrate import upgrade
from a2pg.postgres.probe import Counts, Probe
from a2pg.testing import scratch_database, unique_name

PACKAGE = pathlib.Path(a2pg.__file__).parent
SQL_FOLDER = pathlib.Path(queries.__file__).parent / "sql"


# -- what the code calls -----------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One call of something named ``query``; ``name`` is None when not a literal string."""

    where: str
    name: str | None


CALLS = ("query", "positional")
"""The methods that take a statement's name: ``query`` and ``positional``."""


def query_calls(source: str, where: str) -> Iterator[Call]:
    """The calls ``query(...)`` and ``<anything>.query(...)`` in one module's source,
    except those in the body of a function itself named ``query``: such a function
    forwards its caller's name, and the caller's call is the one that counts."""
    tree = ast.parse(source)
    forwarders = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in CALLS
    ]
    forwarding = {id(inner) for f in forwarders for inner in ast.walk(f)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in forwarding:
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if called not in CALLS:
            continue
        first = node.args[0] if node.args else None
        value = first.value if isinstance(first, ast.Constant) else None
        yield Call(f"{where}:{node.lineno}", value if isinstance(value, str) else None)


def package_calls() -> list[Call]:
    return [
        call
        for path in sorted(PACKAGE.rglob("*.py"))
        for call in query_calls(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE)))
    ]


def test_the_scan_sees_both_call_forms_and_flags_names_that_are_not_literal() -> None:
    source = 'query("a")\nstore.query("b")\nx.y.query("c")\nquery(name)\nquery()\nother("d")\n'
    calls = list(query_calls(source, "m.py"))
    assert [c.name for c in calls] == ["a", "b", "c", None, None]
    assert calls[3].where == "m.py:4"


def test_the_scan_lets_a_function_named_query_forward_its_name() -> None:
    source = (
        "class Db:\n"
        "    def query(self, name):\n"
        "        return queries.query(name)\n"
        "    def read(self, name):\n"
        "        return self.query(name)\n"
        'db.query("a")\n'
    )
    assert set(query_calls(source, "m.py")) == {Call("m.py:5", None), Call("m.py:6", "a")}


def test_every_call_names_its_statement_with_a_literal_string() -> None:
    # A name computed at run time hides which statements are used.
    dynamic = [call.where for call in package_calls() if call.name is None]
    assert not dynamic, f"query() takes a statement's name as a string literal: {dynamic}"


def test_every_name_the_code_calls_is_a_statement() -> None:
    unknown = sorted(
        f"{call.where}: {call.name}"
        for call in package_calls()
        if call.name is not None and call.name not in queries.names()
    )
    assert not unknown, f"no statement has these names: {unknown}"


def test_every_statement_is_called_by_the_code() -> None:
    called = {call.name for call in package_calls()}
    uncalled = sorted(queries.names() - called)
    assert not uncalled, f"no code calls these statements (delete them): {uncalled}"


# -- the files ---------------------------------------------------------------------------


def test_each_file_says_what_it_holds_and_every_include_was_expanded() -> None:
    paths = sorted(SQL_FOLDER.glob("*.sql"))
    assert len(paths) >= 8
    for path in paths:
        assert path.read_text(encoding="utf-8").startswith("-- "), path.name
    for name in queries.names():
        assert "-- include:" not in queries.template(name), name


def test_statements_hold_no_brace_but_their_schema_and_claim_any_its_limit() -> None:
    # Every statement goes through psycopg.sql.SQL.format: any other brace would break it.
    for name in queries.names():
        text = (queries.template(name) + queries.template(name, "citus")).replace("{schema}", "")
        if name in queries.LIMITED:
            text = text.replace("{limit}", "")
        assert "{" not in text and "}" not in text, name
    for name in queries.LIMITED:
        assert b" limit 7 " in queries.statements("public").query(name, limit=7)


def test_query_refuses_fragments_unknown_names_and_misplaced_limits() -> None:
    assert "\n-- fragment: release_dead_pins\n" in (SQL_FOLDER / "claims.sql").read_text()
    public = queries.statements("public")
    for name in ("release_dead_pins", "no_such_statement"):
        with pytest.raises(KeyError, match="no SQL statement"):
            queries.template(name)
        with pytest.raises(KeyError, match="no SQL statement"):
            public.query(name)
    with pytest.raises(ValueError, match="needs its limit"):
        public.query("complete_and_claim")
    with pytest.raises(ValueError, match="takes no limit"):
        public.query("read_events", limit=3)


# -- the loader on small texts -----------------------------------------------------------

FRAGMENTS = """\
-- What this file holds.

-- fragment: inner
-- the inner part
x = 1

-- fragment: outer
where
  -- include: inner

-- name: first
select 1
  from t
  -- include: outer
;

-- name: second
-- a comment of the statement
select 2;
"""


def test_statements_lose_their_semicolon_and_fragments_expand_indented() -> None:
    assert queries.parse(FRAGMENTS) == {
        "first": "select 1\n  from t\n  where\n    -- the inner part\n    x = 1",
        "second": "-- a comment of the statement\nselect 2",
    }


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("-- name: a\nselect 1;\n-- name: a\nselect 2;\n", "'a' is named twice"),
        ("-- fragment: a\nx\n-- name: a\nselect 1\n-- include: a\n;\n", "'a' is named twice"),
        ("-- name: a\nselect 1\n-- include: b\n;\n", "includes unknown fragment 'b'"),
        ("-- fragment: b\nx\n-- name: a\nselect 1;\n", "fragment 'b' is never included"),
        ("-- fragment: b\nx\n-- include: b\n-- name: a\nselect 1\n-- include: b\n;\n", "itself"),
        (
            "-- fragment: b\n-- include: c\n-- fragment: c\n-- include: b\n"
            "-- name: a\nselect 1\n-- include: b\n;\n",
            r"includes itself \(b -> c -> b\)",
        ),
        ("select 0;\n-- name: a\nselect 1;\n", "SQL before the first"),
        ("-- name: a\nselect 1\n-- trailing\n", "does not end with ';'"),
        ("-- fragment: b\nx;\n-- name: a\nselect 1\n-- include: b\n;\n", "ends with ';'"),
        ("-- name: a\n;\n", "statement 'a' is empty"),
    ],
)
def test_the_loader_refuses(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        queries.parse(text)


def test_a_name_given_in_two_files_is_refused_naming_both() -> None:
    files = {"log.sql": "-- name: a\nselect 1;\n", "claims.sql": "-- name: a\nselect 2;\n"}
    named = "'a' is named twice: in log.sql and in claims.sql"
    with pytest.raises(ValueError, match=re.escape(named)):
        queries.load(files)


def test_a_fragment_serves_statements_of_other_files() -> None:
    files = {
        "a.sql": "-- fragment: f\nwhere x = 1\n",
        "b.sql": "-- name: s\nselect 1 from t\n-- include: f\n;\n",
    }
    assert queries.load(files) == {"s": "select 1 from t\nwhere x = 1"}


VARIANTS = """\
-- fragment: where
where x = 1

-- fragment: where@citus
where x = 1 and s = %(session_id)s

-- name: a
select 1 from t
-- include: where
;

-- name: b
select 2;

-- name: b@citus
select 3;
"""


def test_a_dialect_takes_its_variants_of_statements_and_fragments() -> None:
    assert queries.parse(VARIANTS) == {"a": "select 1 from t\nwhere x = 1", "b": "select 2"}
    assert queries.parse(VARIANTS, dialect="citus") == {
        "a": "select 1 from t\nwhere x = 1 and s = %(session_id)s",
        "b": "select 3",
    }
    # A dialect of no variants is the plain text.
    assert queries.parse(VARIANTS, dialect="other") == queries.parse(VARIANTS)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("-- name: a@citus\nselect 1;\n", "statement 'a@citus' is a variant of no statement 'a'"),
        (
            "-- fragment: a@citus\nx\n-- name: a\nselect 1;\n",
            "fragment 'a@citus' is a variant of no fragment 'a'",
        ),
        # What only a variant includes counts as included; a fragment nothing includes does not.
        (
            "-- fragment: f\nx\n-- name: a\nselect 1;\n-- name: a@citus\nselect 2;\n",
            "fragment 'f' is never included",
        ),
    ],
)
def test_the_loader_refuses_variants_of_nothing(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        queries.parse(text)


def test_a_fragment_only_a_variant_includes_is_used() -> None:
    text = (
        "-- fragment: f\nx\n-- name: a\nselect 1;\n-- name: a@citus\nselect 2\n-- include: f\n;\n"
    )
    assert queries.parse(text) == {"a": "select 1"}
    assert queries.parse(text, dialect="citus") == {"a": "select 2\nx"}


def test_every_variant_replaces_a_statement_or_fragment_and_the_files_have_some() -> None:
    texts = "".join(path.read_text(encoding="utf-8") for path in SQL_FOLDER.glob("*.sql"))
    variants = re.findall(r"^-- (?:name|fragment): (\w+)@citus$", texts, re.MULTILINE)
    assert len(variants) >= 10
    changed = {n for n in queries.names() if queries.template(n) != queries.template(n, "citus")}
    assert "claim_session" in changed and "notify_ready" in changed


def test_by_session_splits_the_arrays_of_several_sessions_in_order() -> None:
    citus = queries.statements("public", "citus")
    statement = citus.query("insert_events")
    params = {
        "session_ids": ["b", "a", "b"],
        "idxs": [1, 1, 2],
        "event_ids": ["x", "y", "z"],
        "trace_parents": ["t1"],
        "now": "later",
        "types": ["p", "q", "r"],
    }
    assert citus.by_session(statement, params) == [
        {
            **params,
            "session_ids": ["a"],
            "idxs": [1],
            "event_ids": ["y"],
            "trace_parents": [None],
            "types": ["q"],
            "session_id": "a",
        },
        {
            **params,
            "session_ids": ["b", "b"],
            "idxs": [1, 2],
            "event_ids": ["x", "z"],
            "trace_parents": ["t1", None],
            "types": ["p", "r"],
            "session_id": "b",
        },
    ]
    one = {"session_ids": ["a", "a"], "idxs": [1, 2]}
    assert citus.by_session(statement, one) == [{**one, "session_id": "a"}]
    assert citus.by_session(statement, {"session_ids": []}) == [
        {"session_ids": [], "session_id": None}
    ]
    # Plain PostgreSQL runs the statement once, whatever the sessions.
    plain = queries.statements("public")
    assert plain.by_session(plain.query("insert_events"), params) == [params]


# -- on the server -----------------------------------------------------------------------


def numbered(text: str) -> str:
    """``%(name)s`` placeholders as ``$n``, as PREPARE takes them."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, text)


@pytest.mark.parametrize("dialect", [None, *queries.DIALECTS])
def test_every_statement_parses_on_the_server(
    postgres_dsn: str, dialect: queries.Dialect | None
) -> None:
    # PREPARE parses and analyses (tables, columns, types) without running anything: the
    # Citus variants too, which are plain SQL, but those that call Citus's functions
    # (tests/citus/test_migrate.py parses every statement on Citus).
    assert_every_statement_parses(postgres_dsn, dialect, queries.names() - queries.CITUS_ONLY)


def assert_every_statement_parses(
    dsn: str, dialect: queries.Dialect | None, names: Iterable[str], schema: str = "public"
) -> None:
    """PREPAREs each of ``names`` (rendered for ``schema`` in ``dialect``) on ``dsn``."""
    public = queries.statements(schema, dialect)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in sorted(names):
            limit = 10 if name in queries.LIMITED else None
            text = public.query(name, limit=limit).decode()
            try:
                conn.execute(f"prepare a2pg_check as {numbered(text)}".encode())
            except psycopg.Error as exc:
                pytest.fail(f"{name}: {exc}")
            conn.execute("deallocate a2pg_check")


# -- the probe ---------------------------------------------------------------------------


async def probe_sees(dsn: str, schema: str | None) -> None:
    store = await (
        PostgresStore.open(dsn) if schema is None else PostgresStore.open(dsn, schema=schema)
    )
    try:
        work = [NewEvent("work", {"n": n}, targets=[Target("worker")]) for n in range(3)]
        await store.append("s1", work, consumers=[])
        await store.append("s2", work[:1], consumers=[])
    finally:
        await store.close()
    prefix = unique_name("a2pg_probe")
    probe = await Probe.connect(dsn, schema)
    try:
        assert await probe.counts() == Counts(events=4, live=4, dead=0)
        assert await probe.connected(prefix) == 0
        async with await psycopg.AsyncConnection.connect(dsn, application_name=prefix + "_w"):
            assert await probe.connected(prefix) == 1
    finally:
        await probe.close()


async def test_the_probe_counts_the_default_schema(postgres_dsn: str) -> None:
    await probe_sees(postgres_dsn, None)


async def test_the_probe_counts_a_named_schema(postgres_server_dsn: str) -> None:
    schema = 'A2 "probe" schema'
    with scratch_database(postgres_server_dsn, "a2pg_probe") as dsn:
        upgrade(dsn, schema=schema)
        await probe_sees(dsn, schema)
