"""``a2pg clear`` and ``a2pg reclaim``: one session, and every idle one (retention)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, tzinfo

import psycopg
import pytest

from a2pg.models import NewEvent, SessionInfo, StoredEvent, Target
from a2pg.postgres import PostgresStore
from a2pg.postgres.clear import RECLAIM_BATCH

from .conftest import Cli
from .stores import with_store

SOMEWHERE = "postgresql://postgres@127.0.0.1:1/nothing"
"""A well-formed DSN nothing listens on: usage errors come before anything connects."""

MANY = RECLAIM_BATCH + 44
"""Events of the big session: more than one reclaim batch, so reclaim must loop."""


def events(dsn: str, session: str) -> list[StoredEvent]:
    return with_store(dsn, lambda store: store.read(session))


def sessions(dsn: str) -> dict[str, SessionInfo]:
    infos = with_store(dsn, lambda store: store.sessions(limit=1000))
    return {info.session_id: info for info in infos}


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    """big: MANY events; small: two."""

    async def populate(store: PostgresStore) -> None:
        await store.append("big", [NewEvent("note", n) for n in range(MANY)])
        await store.append("small", [NewEvent("note", 1), NewEvent("note", 2)])

    with_store(postgres_dsn, populate)
    return postgres_dsn


def test_clear_hides_the_events_and_reclaim_deletes_them(cli: Cli, dsn: str) -> None:
    cleared = cli("clear", "big", "--dsn", dsn)
    assert cleared.code == 0, cleared
    marker = MANY + 1
    assert cleared.out == (
        f"cleared big: events below index {marker} are hidden; `a2pg reclaim big` deletes them\n"
    )
    assert [e.index for e in events(dsn, "big")] == [marker]
    reclaimed = cli("reclaim", "big", "--dsn", dsn)
    assert reclaimed.code == 0, reclaimed
    assert reclaimed.out == f"reclaimed big: {MANY} rows deleted\n"
    again = cli("reclaim", "big", "--json", "--dsn", dsn)
    assert json.loads(again.out) == {"session_id": "big", "deleted": 0, "done": True}
    assert [e.index for e in events(dsn, "small")] == [1, 2]


def test_clear_json_and_if_last_index(cli: Cli, dsn: str) -> None:
    result = cli("clear", "small", "--if-last-index", "2", "--json", "--dsn", dsn)
    assert result.code == 0, result
    assert json.loads(result.out) == {
        "session_id": "small",
        "cleared": True,
        "index": 3,
        "clear_index": 3,
    }


def test_clear_if_last_index_mismatch_exits_1_and_writes_nothing(cli: Cli, dsn: str) -> None:
    result = cli("clear", "small", "--if-last-index", "1", "--dsn", dsn)
    assert result.code == 1
    assert result.out == ""
    assert result.err == (
        "a2pg: error: not cleared: the head of session 'small' is 2, not 1 (--if-last-index)\n"
    )
    as_json = cli("clear", "small", "--if-last-index", "1", "--json", "--dsn", dsn)
    assert as_json.code == 1
    assert json.loads(as_json.out)["cleared"] is False
    assert as_json.err.count("\n") == 1
    assert [e.index for e in events(dsn, "small")] == [1, 2]


@pytest.mark.parametrize("command", ["clear", "reclaim"])
def test_unknown_session_exits_5_and_creates_nothing(cli: Cli, dsn: str, command: str) -> None:
    result = cli(command, "nope", "--dsn", dsn)
    assert result.code == 5
    assert result.err == "a2pg: error: unknown session 'nope'\n"
    assert "nope" not in sessions(dsn)


def test_a_bad_session_id_is_a_usage_error(cli: Cli, dsn: str) -> None:
    result = cli("clear", "x" * 5000, "--dsn", dsn)
    assert result.code == 2, result
    assert result.err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["clear"], "clear needs SESSION or --older-than DURATION (not both)"),
        (["clear", "s", "--older-than", "1d"], "clear needs SESSION or --older-than"),
        (["clear", "--older-than", "1d", "--if-last-index", "3"], "--if-last-index clears one"),
        (["clear", "s", "--dry-run"], "--dry-run goes with --older-than; not with SESSION"),
        (["clear", "s", "--include-unfinished"], "--include-unfinished goes with --older-than"),
        (["reclaim"], "reclaim needs SESSION, or --all and/or --older-than DURATION"),
        (["reclaim", "s", "--all"], "reclaim needs SESSION, or --all"),
        (["reclaim", "s", "--older-than", "2h"], "reclaim needs SESSION, or --all"),
    ],
    ids=" ".join,
)
def test_retention_usage_errors_exit_2(cli: Cli, argv: list[str], message: str) -> None:
    result = cli(*argv, "--dsn", SOMEWHERE)
    assert result.code == 2
    assert result.err.startswith(f"a2pg: error: {message}")
    assert result.err.count("\n") == 1


@pytest.mark.parametrize("text", ["30", "1w", "0s", "-1d", "d", "1.5.2h", "101000d", ""])
def test_bad_durations_exit_2(cli: Cli, text: str) -> None:
    result = cli("reclaim", "--older-than", text, "--dsn", SOMEWHERE)
    assert result.code == 2
    assert "--older-than" in result.err


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45s", 45), ("90m", 5400), ("12h", 43200), ("30d", 2592000), ("1.5h", 5400)],
)
def test_durations(text: str, seconds: float) -> None:
    from a2pg.cli.operate.base import duration

    assert duration(text) == seconds


def backdate(dsn: str, session: str, days: int) -> None:
    """Makes a session's events ``days`` older, as if appended back then."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "update a2_events set created_at = created_at - make_interval(days => %s)"
            " where session_id = %s",
            (days, session),
        )


@pytest.fixture
def aged(postgres_dsn: str) -> str:
    """Idle 40 days: old; old-busy (a head pending); old-cleared (cleared first).
    Today: new (cleared), fresh."""

    async def populate(store: PostgresStore) -> None:
        for session in ("old", "old-cleared", "new", "fresh"):
            await store.append(session, [NewEvent("note", n) for n in range(3)])
        await store.append("old-busy", [NewEvent("job", None, targets=(Target("mailer"),))])
        await store.clear("old-cleared")
        await store.clear("new")

    with_store(postgres_dsn, populate)
    for session in ("old", "old-busy", "old-cleared"):
        backdate(postgres_dsn, session, 40)
    return postgres_dsn


def stored_rows(dsn: str) -> dict[str, int]:
    """Events stored per session, hidden ones too (what reclaim deletes)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "select session_id, count(*) from a2_events group by session_id"
        ).fetchall()
    return {session: count for session, count in rows}


def test_clear_older_than_dry_run_changes_nothing(cli: Cli, aged: str) -> None:
    before = sessions(aged)
    result = cli("clear", "--older-than", "30d", "--dry-run", "--dsn", aged)
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert lines[0].split() == [
        "SESSION",
        "ID",
        "HEAD",
        "PENDING",
        "BLOCKED",
        "DEAD",
        "LETTERS",
        "LAST",
        "EVENT",
        "AT",
        "OUTCOME",
    ]
    assert lines[2].split()[:5] == ["old", "3", "0", "0", "0"]
    assert lines[2].endswith("would clear")
    assert lines[3].split()[:5] == ["old-busy", "1", "1", "0", "0"]
    assert lines[3].endswith("kept: unfinished work")
    assert len(lines) == 5
    assert lines[4].startswith("would clear 1 of 2 sessions idle since ")
    assert lines[4].endswith("; 1 kept for their unfinished work (--include-unfinished)")
    assert sessions(aged) == before


def test_clear_older_than_clears_only_idle_sessions(cli: Cli, aged: str) -> None:
    result = cli("clear", "--older-than", "30d", "--json", "--dsn", aged)
    assert result.code == 0, result
    data = json.loads(result.out)
    assert [(s["session_id"], s["outcome"], s["clear_index"]) for s in data["sessions"]] == [
        ("old", "cleared", 4),
        ("old-busy", "kept: unfinished work", 0),
    ]
    assert (data["matched"], data["cleared"], data["dry_run"]) == (2, 1, False)
    assert data["older_than"] == 30 * 86_400
    after = sessions(aged)
    assert (after["old"].clear_index, after["old-busy"].clear_index) == (4, 0)
    assert (after["fresh"].clear_index, after["old-cleared"].clear_index) == (0, 4)
    again = cli("clear", "--older-than", "30d", "--dsn", aged)
    assert again.out.splitlines()[2].split()[0] == "old-busy"  # "old" ends with its marker now
    assert again.out.splitlines()[-1].startswith("cleared 0 of 1 sessions idle since ")


def test_clear_older_than_include_unfinished(cli: Cli, aged: str) -> None:
    result = cli("clear", "--older-than", "30d", "--include-unfinished", "--dsn", aged)
    assert result.code == 0, result
    assert result.out.splitlines()[-1].startswith("cleared 2 of 2 sessions idle since ")
    after = sessions(aged)
    assert (after["old"].clear_index, after["old-busy"].clear_index) == (4, 2)
    assert after["old-busy"].pending == 0


def test_clear_older_than_nothing_idle(cli: Cli, aged: str) -> None:
    result = cli("clear", "--older-than", "50d", "--dsn", aged)
    assert result.code == 0, result
    assert result.out.startswith("no sessions to clear: none idle since ")
    assert len(result.out.splitlines()) == 1


def test_reclaim_older_than_touches_only_old_sessions(cli: Cli, aged: str) -> None:
    before = stored_rows(aged)
    result = cli("reclaim", "--all", "--older-than", "30d", "--dsn", aged)
    assert result.code == 0, result
    assert result.out.splitlines()[2].split() == ["old-cleared", "3"]
    assert result.out.splitlines()[-1] == "3 rows deleted from 1 of 1 cleared sessions"
    assert stored_rows(aged) == {**before, "old-cleared": 1}
    everything = cli("reclaim", "--all", "--json", "--dsn", aged)
    assert json.loads(everything.out) == {
        "older_than": None,
        "cutoff": None,
        "sessions": [{"session_id": "new", "deleted": 3}],
        "examined": 2,
        "deleted": 3,
    }
    assert stored_rows(aged) == {**before, "old-cleared": 1, "new": 1}


def test_reclaim_older_than_alone_means_all_sessions_that_old(cli: Cli, aged: str) -> None:
    result = cli("reclaim", "--older-than", "30d", "--json", "--dsn", aged)
    assert result.code == 0, result
    assert json.loads(result.out)["sessions"] == [{"session_id": "old-cleared", "deleted": 3}]


CLIENT_SKEWS = {"client-ahead-31d": timedelta(days=31), "client-behind-20d": timedelta(days=-20)}
"""How far the command's own clock is off the database's: more than the 30 days asked for
ahead (today's sessions would look idle), or 20 days behind (the 40-day-old ones not)."""


@pytest.fixture(params=list(CLIENT_SKEWS))
def skewed_client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine running ``a2pg`` keeps another time than the database server."""
    from a2pg.cli.operate import base

    skew = CLIENT_SKEWS[request.param]

    class ClientClock(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]
            return datetime.now(tz) + skew

    monkeypatch.setattr(base, "datetime", ClientClock)


@pytest.mark.usefixtures("skewed_client")
def test_clear_older_than_goes_by_the_database_clock(cli: Cli, aged: str) -> None:
    result = cli("clear", "--older-than", "30d", "--json", "--dsn", aged)
    assert result.code == 0, result
    data = json.loads(result.out)
    assert [(s["session_id"], s["outcome"]) for s in data["sessions"]] == [
        ("old", "cleared"),
        ("old-busy", "kept: unfinished work"),
    ]
    with psycopg.connect(aged) as conn:
        row = conn.execute("select now() - interval '30 days'").fetchone()
    assert row is not None
    assert abs(datetime.fromisoformat(data["cutoff"]) - row[0]) < timedelta(minutes=5)


@pytest.mark.usefixtures("skewed_client")
def test_reclaim_older_than_goes_by_the_database_clock(cli: Cli, aged: str) -> None:
    result = cli("reclaim", "--all", "--older-than", "30d", "--json", "--dsn", aged)
    assert result.code == 0, result
    assert json.loads(result.out)["sessions"] == [{"session_id": "old-cleared", "deleted": 3}]


def test_a_session_that_changed_since_listed_is_not_cleared(aged: str) -> None:
    """The bulk clear passes the listed head as if_last_index: a new event wins."""
    from a2pg.cli.main import build_parser
    from a2pg.cli.operate.retention import _clear_idle_one

    listed = sessions(aged)["old"]
    args = build_parser().parse_args(["clear", "--older-than", "30d"])

    async def race(store: PostgresStore) -> dict[str, object]:
        await store.append("old", [NewEvent("note", "late")])
        return await _clear_idle_one(store, listed, args)

    row = with_store(aged, race)
    assert row["outcome"] == "skipped: new events"
    assert sessions(aged)["old"].clear_index == 0


@pytest.mark.parametrize("text", ["x", "1.5", "-1"])
def test_a_bad_if_last_index_says_what_it_wants(cli: Cli, text: str) -> None:
    result = cli("clear", "s", "--if-last-index", text, "--dsn", SOMEWHERE)
    assert result.code == 2
    assert "argument --if-last-index: must be a whole number, 0 or more" in result.err
    assert "_index" not in result.err
