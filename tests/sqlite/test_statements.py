"""The SQLite store's named statements: each one used, each used one written, and the hot
ones on their indexes (EXPLAIN QUERY PLAN on a migrated file)."""

from __future__ import annotations

import ast
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from a2pg.sqlite import queries, upgrade

PACKAGE = Path(queries.__file__).parent
RUNNERS = frozenset({"one", "rows", "run", "statement", "_row"})
"""The functions and methods that take a statement's name (first, or after the connection)."""


def called_names() -> set[str]:
    """Every literal name passed first to a statement runner in a2pg/sqlite."""
    found: set[str] = set()
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in RUNNERS:
                continue
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
            elif len(node.args) > 1:  # one(conn, "name"), rows(conn, "name"), run(...)
                second = node.args[1]
                if isinstance(second, ast.Constant) and isinstance(second.value, str):
                    found.add(second.value)
    return found


def test_every_statement_is_called_and_every_call_names_one() -> None:
    called = called_names()
    assert called - queries.names() == set()
    assert queries.names() - called == set()


def test_the_scan_sees_calls() -> None:
    """The check above is worth something only if the scan finds the calls."""
    assert {"claim_head", "ready_heads", "session_head", "data_version"} <= called_names()


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    path = tmp_path / "a2.db"
    upgrade(path)
    connection = sqlite3.connect(path)
    yield connection
    connection.close()


def plan(conn: sqlite3.Connection, name: str, params: dict[str, object]) -> str:
    rows = conn.execute("explain query plan " + queries.statement(name), params).fetchall()
    return "\n".join(str(row[-1]) for row in rows)


def test_claim_any_walks_the_ready_index_in_order(conn: sqlite3.Connection) -> None:
    """No sort: the first ``limit`` ready heads are read off a2_cursors_ready, however
    long the backlog."""
    text = plan(conn, "ready_heads", {"now": 0, "names": None, "limit": 10})
    assert "a2_cursors_ready" in text
    assert "TEMP B-TREE" not in text, text


@pytest.mark.parametrize(
    ("name", "params", "index"),
    [
        ("ready_sessions", {"now": 0, "limit": 10}, "a2_cursors_ready"),
        ("has_pending", {"session_id": "s", "clear_index": 0, "names": None}, "a2_cursors_heads"),
        ("live_heads", {"session_id": "s", "clear_index": 0}, "a2_cursors_heads"),
        (
            "next_lane_head",
            {"session_id": "s", "consumer": "c", "lane": "l", "after": 0},
            "sqlite_autoindex_a2_lane_events_1",
        ),
        (
            "live_owners",
            {"session_id": "s", "ids": '["a"]', "clear_index": 0},
            "a2_events_session_event_id",
        ),
        (
            "find_dead_letters",
            {
                "after_session": "",
                "after_consumer": "",
                "after_lane": "",
                "after_index": 0,
                "consumer": None,
                "prefix": None,
                "error": None,
                "limit": 10,
            },
            "a2_cursors_dead",
        ),
    ],
)
def test_hot_statements_use_their_index(
    conn: sqlite3.Connection, name: str, params: dict[str, object], index: str
) -> None:
    text = plan(conn, name, params)
    assert index in text, text
    assert "SCAN c\n" not in text + "\n" and "SCAN a2_cursors\n" not in text + "\n", text


def test_consumer_stats_reads_the_ready_and_dead_indexes_only(conn: sqlite3.Connection) -> None:
    """Finished cursors are most of a2_cursors: the stats never walk them."""
    text = plan(conn, "consumer_stats", {"now": 0})
    assert "a2_cursors_ready" in text and "a2_cursors_dead" in text, text
    assert "a2_cursors_heads" not in text, text


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("next_log_head", {"session_id": "s", "after": 0, "types": '["a"]'}),
        ("next_lane_head", {"session_id": "s", "consumer": "c", "lane": "l", "after": 0}),
    ],
)
def test_next_heads_stop_at_the_first_match(
    conn: sqlite3.Connection, name: str, params: dict[str, object]
) -> None:
    """A cursor's next head is read walking the primary key from its position, in order, so
    the read ends at the first match however much of the session lies beyond."""
    text = plan(conn, name, params)
    assert "TEMP B-TREE" not in text, text
    assert "SEARCH" in text and "autoindex" in text, text
