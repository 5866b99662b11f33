"""The SQLite store's migrations: a small versioned runner, as Alembic is PostgreSQL's.

Each revision is a script in ``migrations/`` (``0001_seed_layout.sql``,
``0002_a2pg.sql``), applied in order inside one ``BEGIN IMMEDIATE`` transaction with
the revision recorded in ``a2_meta``: SQLite's DDL is transactional, so a migration
applies whole or not at all, and two migrators started at once take turns (the second
finds the file current). ``0001`` is the seed's own ``cursors-1`` layout: a file the
JavaScript SQLite store wrote is at ``0001`` and migrates on like any other, one way
(``0002`` makes that store's open fail, naming a2pg). The layout from before
consumers is refused, as the seed refused it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path

from .connection import BUSY_TIMEOUT, check_path, connect, use_wal
from .layout import REVISIONS, LayoutStatus, inspect_connection


@dataclass(frozen=True, slots=True)
class Migration:
    revision: str
    name: str
    statements: tuple[str, ...]


def split(script: str) -> Iterator[str]:
    """The statements of a script, one by one (``executescript`` would commit first)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statement = pending.strip()
            pending = ""
            if any(
                part.strip() and not part.strip().startswith("--")
                for part in statement.splitlines()
            ):
                yield statement
    if any(part.strip() and not part.strip().startswith("--") for part in pending.splitlines()):
        raise ValueError(f"a migration ends in an unfinished statement: {pending.strip()[:80]!r}")


@cache
def migrations() -> tuple[Migration, ...]:
    """The shipped scripts, by revision; each revision is named by its file's first part."""
    folder = files(__package__).joinpath("migrations")
    found = []
    for entry in sorted(folder.iterdir(), key=lambda entry: entry.name):
        if entry.name.endswith(".sql"):
            revision = entry.name.split("_", 1)[0]
            text = entry.read_text(encoding="utf-8")
            found.append(Migration(revision, entry.name, tuple(split(text))))
    revisions = tuple(m.revision for m in found)
    if revisions != REVISIONS:
        raise RuntimeError(f"migration scripts {revisions} do not match layout.REVISIONS")
    return tuple(found)


def refuse_unmigratable(status: LayoutStatus) -> None:
    """``STORE_NOT_CONFIGURED`` for what no migration can fix (nothing is written first)."""
    if status.state in ("foreign", "pre-consumer", "newer", "unknown"):
        raise status.error()


def upgrade_connection(conn: sqlite3.Connection, path: Path) -> LayoutStatus:
    """Brings the file of ``conn`` (autocommit, WAL) to the head revision, in one
    transaction; refuses (``STORE_NOT_CONFIGURED``) a layout it cannot migrate."""
    conn.execute("begin immediate")
    try:
        status = inspect_connection(conn, path)
        refuse_unmigratable(status)
        done = 0 if status.revision is None else REVISIONS.index(status.revision) + 1
        for migration in migrations()[done:]:
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                "insert into a2_meta (key, value) values ('revision', ?)"
                " on conflict (key) do update set value = excluded.value",
                (migration.revision,),
            )
        after = inspect_connection(conn, path)
        conn.execute("commit")
    except BaseException:
        if conn.in_transaction:
            conn.execute("rollback")
        raise
    return after


def upgrade(path: object, *, busy_timeout: float = BUSY_TIMEOUT) -> LayoutStatus:
    """Creates the file (and its folder) if missing, puts it in WAL mode and migrates it to
    the head revision; safe to run from several processes at once. Returns its layout."""
    file = check_path(path)
    if file.parent != Path(""):
        file.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(file, create=True, busy_timeout=busy_timeout)
    try:
        refuse_unmigratable(inspect_connection(conn, file))  # before WAL mode writes a byte
        use_wal(conn, busy_timeout=busy_timeout)
        return upgrade_connection(conn, file)
    finally:
        conn.close()
