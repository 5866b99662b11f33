"""A Citus cluster for the tests of this folder, and a fresh schema in it per test.

The cluster (fixture ``citus_dsn``) comes from ``tests/citus_cluster.py``.

Citus keeps its metadata per database, and a database cloned from a template points at
shards that were not cloned: the tests share the one distributed database and each
migrates a schema of its own, dropped afterwards (``public``'s a2pg tables, for the
tests of the default schema).
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from a2pg.cli import main
from a2pg.postgres import citus

_SCHEMAS = itertools.count(1)


def _drop_public_tables(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in citus.KINDS:
            conn.execute(
                sql.SQL("drop table if exists {} cascade").format(sql.Identifier("public", table))
            )


def fresh_schema(dsn: str) -> Iterator[str]:
    """A schema of the test's own, named so that every statement must quote it."""
    name = f'a2 "Citus" {next(_SCHEMAS)}'
    yield name
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(name)))


@pytest.fixture
def own_schema(citus_dsn: str) -> Iterator[str]:
    """A fresh non-default schema, dropped afterwards."""
    yield from fresh_schema(citus_dsn)


@pytest.fixture(params=["public", "own"], ids=["public", "own-schema"])
def schema(request: pytest.FixtureRequest, citus_dsn: str) -> Iterator[str]:
    """The default schema (its a2pg tables dropped before and after), then a fresh one."""
    if request.param == "own":
        yield from fresh_schema(citus_dsn)
        return
    _drop_public_tables(citus_dsn)
    yield "public"
    _drop_public_tables(citus_dsn)


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


Cli = Callable[..., Result]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """``cli("migrate", "--dsn", dsn)``: the real ``a2pg`` command, run in-process."""
    for name in ("A2PG_DSN", "A2PG_SCHEMA", citus.SHARDS_ENV):
        monkeypatch.delenv(name, raising=False)

    def run(*argv: str) -> Result:
        out = io.StringIO()
        capsys.readouterr()
        try:
            code = main(list(argv), stdout=out)
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Result(code, out.getvalue() + captured.out, captured.err)

    return run
