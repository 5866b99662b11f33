"""Test databases on a PostgreSQL server: unique names, creating and dropping them, the
migrated template the plugin clones, and the database a process reuses between tests.

Apart from the plugin so that a test (or a user's fixture) can make databases of its own
on any server DSN, without the pytest hooks.
"""

from __future__ import annotations

import contextlib
import getpass
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..postgres.dsn import redact as dsn_redact
from ..postgres.layout import DEFAULT_SCHEMA

USER_CHARACTERS = 20
"""How much of the user's name the default prefix keeps."""


def default_prefix(user: str | None = None) -> str:
    """``a2pg_test_<user>``: the login name (``user``, else the current one) lower-cased,
    each run of other characters than ``a-z0-9_`` as one ``_``, at most 20 of them;
    ``anon`` when there is none. On a shared server the plugin's databases then say
    whose they are, and no one's ``a2pg_...`` database looks like one of them."""
    if user is None:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # a container's uid with no name and no $USER
            user = ""
    cleaned = re.sub(r"[^a-z0-9_]+", "_", user.lower()).strip("_")[:USER_CHARACTERS]
    return f"a2pg_test_{cleaned.strip('_') or 'anon'}"


DEFAULT_PREFIX = default_prefix()
"""The default start of the plugin's database names (``--a2pg-database-prefix``):
``a2pg_test_<user>`` (:func:`default_prefix`)."""

_URL = re.compile(r"^postgres(?:ql)?://")


def unique_name(prefix: str) -> str:
    """A database name no other test run on the same server will pick."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def dsn_for_database(dsn: str, dbname: str) -> str:
    """``dsn`` pointing at another database of the same server."""
    if _URL.match(dsn):
        return urlunsplit(urlsplit(dsn)._replace(path="/" + quote(dbname)))
    return make_conninfo(dsn, dbname=dbname)


def redact(dsn: str) -> str:
    """``dsn`` without its password, for printing (``a2pg.postgres.dsn.redact``)."""
    return dsn_redact(dsn)


def server_version(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        return conn.info.parameter_status("server_version") or "unknown"


def create_database(server_dsn: str, name: str, template: str | None = None) -> str:
    """Creates database ``name`` (from ``template`` if given) and returns its DSN."""
    query = sql.SQL("create database {}").format(sql.Identifier(name))
    if template is not None:
        query += sql.SQL(" template {}").format(sql.Identifier(template))
    with psycopg.connect(server_dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(query)
    return dsn_for_database(server_dsn, name)


def drop_database(server_dsn: str, name: str) -> None:
    """Drops ``name``, ending any connection a test left open on it."""
    query = sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
    with psycopg.connect(server_dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(query)


@contextlib.contextmanager
def scratch_database(server_dsn: str, prefix: str = f"{DEFAULT_PREFIX}_db") -> Iterator[str]:
    """An empty database with a unique name, dropped on exit; yields its DSN."""
    name = unique_name(prefix)
    dsn = create_database(server_dsn, name)
    try:
        yield dsn
    finally:
        drop_database(server_dsn, name)


@dataclass(frozen=True)
class DatabaseTemplate:
    """A database migrated once, cloned for each test (nobody may connect to it)."""

    server_dsn: str
    name: str
    schema: str = DEFAULT_SCHEMA
    """Where a2pg's tables are."""
    prefix: str = DEFAULT_PREFIX

    def clone(self, prefix: str | None = None) -> str:
        """Creates a fresh copy and returns its DSN; drop it with ``drop_database``."""
        name = unique_name(prefix or f"{self.prefix}_test")
        return create_database(self.server_dsn, name, template=self.name)


class ReusableDatabase:
    """One migrated database a process hands to test after test, emptied in between.

    Emptying the tables costs about a millisecond; cloning and dropping a database
    costs hundreds (both need checkpoints), which made the PostgreSQL suite several
    times slower. A test that changed more than rows (the layout, a schema, the
    meta table) gets a fresh clone instead, so every test still starts clean.
    """

    def __init__(self, template: DatabaseTemplate) -> None:
        self._template = template
        self._dsn: str | None = None

    def checkout(self) -> str:
        if self._dsn is None or not self._reset(self._dsn):
            self.discard()
            self._dsn = self._template.clone()
        return self._dsn

    def discard(self) -> None:
        if self._dsn is not None:
            drop_database(self._template.server_dsn, _dbname(self._dsn))
            self._dsn = None

    def _reset(self, dsn: str) -> bool:
        """Ends connections a test left behind and empties every table; False when the
        database is no longer a pristine head layout and must be replaced."""
        from ..postgres.layout import HEAD_REVISION, LAYOUT, TABLES

        with psycopg.connect(self._template.server_dsn, autocommit=True) as server:
            server.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity"
                " where datname = %s and pid <> pg_backend_pid()",
                (_dbname(dsn),),
            )
        with psycopg.connect(dsn, autocommit=True) as conn:
            tables = {
                row[0]
                for row in conn.execute(
                    "select table_schema || '.' || table_name from information_schema.tables"
                    " where table_schema not in ('pg_catalog', 'information_schema')"
                )
            }
            schema = self._template.schema
            expected = {f"{schema}.{name}" for name in (*TABLES, "a2_alembic_version")}
            if tables != expected:
                return False
            where = sql.Identifier(schema)
            meta: dict[str, str] = dict(
                conn.execute(sql.SQL("select key, value from {}.a2_meta").format(where))
            )
            if meta != {"layout": LAYOUT, "revision": HEAD_REVISION}:
                return False
            emptied = [name for name in TABLES if name != "a2_meta"]
            with conn.transaction():
                for name in emptied:
                    table = sql.Identifier(schema, name)
                    conn.execute(sql.SQL("delete from {}").format(table))
        return True


def _dbname(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])
