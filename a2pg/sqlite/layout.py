"""The layout check: what a SQLite file holds, compared with what this a2pg reads and writes.

``a2pg check --sqlite`` calls :func:`inspect_file`; ``SqliteStore.open`` refuses
anything but the current layout (``STORE_NOT_CONFIGURED``): the store never creates
or alters tables itself (``a2pg migrate --sqlite`` does, see ``migrate``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import A2Error

LAYOUT = "cursors-1"
"""The seed's layout name, recorded in ``a2_meta`` under ``layout``."""

REVISIONS = ("0001", "0002", "0003", "0004")
"""The migrations, oldest first: ``0001`` is the seed's own layout, ``0002`` on a2pg's."""

HEAD_REVISION = REVISIONS[-1]
SEED_REVISION = REVISIONS[0]

TABLES = (
    "a2_meta",
    "a2_events",
    "a2_cursors",
    "a2_lane_events",
    "a2_snapshots",
    "a2_snapshot_history",
    "a2_snapshot_pins",
    "a2_clears",
    "a2_presence",
    "a2_consumers",
    "a2_consumer_pauses",
    "a2_workers",
    "a2_attempts",
    "a2_audit",
)
"""Every table the head revision has; a test checks this against a migrated file."""

LayoutState = Literal[
    "current", "missing", "foreign", "empty", "older", "newer", "pre-consumer", "unknown"
]


@dataclass(frozen=True, slots=True)
class LayoutStatus:
    """What a file holds, compared with what this a2pg expects."""

    state: LayoutState
    path: str
    revision: str | None
    """The a2pg revision the file is at (``0001`` for a file the seed's store wrote)."""
    expected: str = HEAD_REVISION

    @property
    def is_current(self) -> bool:
        return self.state == "current"

    def describe(self) -> str:
        where = f"the SQLite database {self.path}"
        if self.state == "current":
            return f"{where} has the a2pg layout {LAYOUT} at revision {self.revision} (current)"
        if self.state == "missing":
            return f"there is no SQLite database at {self.path}"
        if self.state == "foreign":
            return f"the file {self.path} is not a SQLite database"
        if self.state == "empty":
            return f"{where} has no a2pg tables"
        if self.state == "older":
            if self.revision == SEED_REVISION:
                return (
                    f"{where} has the {LAYOUT} layout of the JavaScript SQLite store "
                    f"(revision {SEED_REVISION}), older than {self.expected}"
                )
            return f"{where} is at a2pg revision {self.revision}, older than {self.expected}"
        if self.state == "newer":
            return (
                f"{where} is at a2pg revision {self.revision}, which this a2pg (head "
                f"{self.expected}) does not know: a newer a2pg migrated it"
            )
        if self.state == "pre-consumer":
            return f"{where} holds the A2 layout from before consumers (a2_events.processed_at)"
        return f"{where} has a2pg tables but no {LAYOUT} layout record in a2_meta"

    def fix(self) -> str:
        """What to do about it; every state a migration can fix names ``a2pg migrate``."""
        if self.state == "current":
            return "nothing to do"
        if self.state in ("missing", "empty", "older"):
            return f"run `a2pg migrate --sqlite {self.path}`"
        if self.state == "newer":
            return "use the newer a2pg whose `a2pg migrate` made it"
        if self.state == "foreign":
            return "point the store at another file (`a2pg migrate --sqlite PATH` makes one)"
        if self.state == "pre-consumer":
            return (
                "a2pg cannot convert it (nor could the seed): delete it, or point the store "
                "at a fresh database file and run `a2pg migrate --sqlite` there"
            )
        return "move those tables aside and run `a2pg migrate --sqlite`, or use another file"

    def error(self) -> A2Error:
        """The ``STORE_NOT_CONFIGURED`` error a store raises on this file."""
        return A2Error("STORE_NOT_CONFIGURED", f"{self.describe()}; {self.fix()}")

    def __str__(self) -> str:
        return self.describe()


def inspect_connection(conn: sqlite3.Connection, path: Path) -> LayoutStatus:
    """What the file of ``conn`` holds, read in the connection's transaction, if any."""
    where = str(path)
    try:
        tables = {
            str(row[0])
            for row in conn.execute(
                "select name from sqlite_master where type = 'table'"
                " and name like 'a2!_%' escape '!'"
            )
        }
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError):
            raise  # locked, unreadable: not a verdict on the file
        return LayoutStatus("foreign", where, None)
    if "a2_events" in tables:
        columns = {str(row[1]) for row in conn.execute("pragma table_info(a2_events)")}
        if "processed_at" in columns:
            return LayoutStatus("pre-consumer", where, None)
    if "a2_meta" not in tables:
        return LayoutStatus("unknown" if tables else "empty", where, None)
    meta = {str(key): str(value) for key, value in conn.execute("select key, value from a2_meta")}
    if meta.get("layout") != LAYOUT:
        return LayoutStatus("unknown", where, meta.get("revision"))
    revision = meta.get("revision", SEED_REVISION)  # the seed records no revision
    if revision not in REVISIONS:
        return LayoutStatus("newer", where, revision)
    return LayoutStatus("current" if revision == HEAD_REVISION else "older", where, revision)


def inspect_file(path: Path) -> LayoutStatus:
    """What the file at ``path`` holds; read-only, and it never creates the file."""
    if not path.exists():
        return LayoutStatus("missing", str(path), None)
    uri = f"{path.absolute().as_uri()}?mode=rw"  # ro cannot read a WAL file without its -shm
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=10.0)
    try:
        return inspect_connection(conn, path)
    finally:
        conn.close()
