"""find_heads on SQLite walks a2_cursors_ready, which holds claim order whole (ready_at,
session, index, consumer, lane): no sort, and the scan stops at the limit, for every
state and filter (EXPLAIN QUERY PLAN on a migrated file)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from a2pg.models import WORK_STATES, HeadKey, HeadQuery
from a2pg.sqlite import queries, upgrade
from a2pg.sqlite.monitoring import head_page

NOW_US = 1_767_225_600_000_000
KEY = HeadKey(datetime(2026, 1, 1, tzinfo=UTC), "s", 1, "c", "")


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    path = tmp_path / "a2.db"
    upgrade(path)
    connection = sqlite3.connect(path)
    yield connection
    connection.close()


@pytest.mark.parametrize(
    "query",
    [HeadQuery(state) for state in WORK_STATES]
    + [
        HeadQuery(after=KEY),
        HeadQuery("backing_off", consumer="c", error="x", session_prefix="s", event_type="t"),
    ],
    ids=[*WORK_STATES, "after", "filtered"],
)
def test_find_heads_walks_the_ready_index_without_sorting(
    conn: sqlite3.Connection, query: HeadQuery
) -> None:
    rows = conn.execute(
        "explain query plan " + queries.statement("find_heads"), head_page(query, NOW_US)
    ).fetchall()
    text = "\n".join(str(row[-1]) for row in rows)
    assert "USING INDEX a2_cursors_ready" in text, text
    assert "TEMP B-TREE" not in text, text


def test_a_page_starts_at_its_key_time_and_its_state_bound() -> None:
    """The range walked starts at the later of the state's bound and the key's time."""
    ready = head_page(HeadQuery(), NOW_US)
    assert (ready["start"], ready["high"]) == (-(2**63), NOW_US)
    held = head_page(HeadQuery("held"), NOW_US)
    assert (held["start"], held["high"]) == (NOW_US + 1, 2**63 - 1)
    past_key = head_page(HeadQuery("held", after=KEY), NOW_US - 10**6)
    assert past_key["start"] == past_key["after_ready"] == NOW_US
    past_now = head_page(HeadQuery("held", after=KEY), NOW_US + 10**6)
    assert past_now["start"] == NOW_US + 10**6 + 1
    deep = head_page(HeadQuery(after=KEY), NOW_US + 10**6)
    assert (deep["start"], deep["high"]) == (NOW_US, NOW_US + 10**6)
