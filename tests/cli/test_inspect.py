"""Inspection commands against a migrated database holding a blocked lane and pending work."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess

import pytest

from a2pg.models import Claimed, NewEvent, Target

from .conftest import A2PG, Cli


async def populate(dsn: str) -> None:
    """s1: a lane head dead-lettered (blocking a second lane event), an event cursor pending;
    s2: one plain event."""
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        lane = (Target("reply", "turns"),)
        await store.append("s1", [NewEvent("chat.user", {"n": 1}, targets=lane)])
        await store.append("s1", [NewEvent("chat.user", {"n": 2}, targets=lane)])
        await store.append("s1", [NewEvent("job", None, targets=(Target("mailer"),))])
        await store.append("s2", [NewEvent("note", "hello")])
        claimed = await store.claim_available("s1", holder="w1", ttl=30, through=1)
        assert isinstance(claimed, Claimed)
        head = next(h for h in claimed.heads if h.consumer == "reply")
        failed = await store.fail_attempt(
            "s1",
            consumer="reply",
            lane="turns",
            index=head.index,
            attempt=head.attempt,
            error="Traceback (most recent call last):\n  File x\nRuntimeError: model crashed\n",
            max_failures=1,
        )
        assert failed.outcome == "dead_lettered"
    finally:
        await store.close()


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    asyncio.run(populate(postgres_dsn))
    return postgres_dsn


def test_sessions_table_and_json(cli: Cli, dsn: str) -> None:
    table = cli("sessions", "--dsn", dsn)
    assert table.code == 0
    lines = table.out.splitlines()
    assert lines[0].split() == [
        "SESSION",
        "ID",
        "HEAD",
        "CLEAR",
        "INDEX",
        "PENDING",
        "BLOCKED",
        "DEAD",
        "LETTERS",
        "LAST",
        "EVENT",
        "AT",
    ]
    # s1: the mailer's head pending; the lane event behind the dead-lettered head blocked
    assert lines[2].split()[:6] == ["s1", "3", "0", "1", "1", "1"]
    assert lines[3].split()[:6] == ["s2", "1", "0", "0", "0", "0"]
    assert lines[2].endswith("Z")  # the last event's time, UTC
    # a blocked session is said in words, and the legend says what PENDING leaves out
    note = "session s1: pending 1, blocked 1 behind 1 dead letter: see `a2pg cursors s1`"
    assert lines[4] == note
    legend = " ".join(lines[5:])
    assert legend.startswith("PENDING: heads to run (ready, leased, backing off or scheduled)")
    assert "BLOCKED: events held behind a dead-lettered lane or log head" in legend
    data = json.loads(cli("sessions", "--json", "--dsn", dsn).out)
    assert [s["session_id"] for s in data] == ["s1", "s2"]
    assert data[0]["dead_letters"] == 1
    assert data[0]["blocked"] == 1
    assert None not in (data[0]["last_event_at"], data[1]["last_event_at"])
    assert data[1]["last_event_at"] >= data[0]["last_event_at"]  # s2 appended after s1
    page = cli("sessions", "--limit", "1", "--dsn", dsn)
    assert "(more: --after s1)" in page.out
    assert "s2" in cli("sessions", "--after", "s1", "--dsn", dsn).out


def test_cursors_show_the_blocked_lane(cli: Cli, dsn: str) -> None:
    result = cli("cursors", "s1", "--dsn", dsn)
    assert result.code == 0
    rows = {line.split()[0]: line for line in result.out.splitlines()[2:] if line[:1].islower()}
    assert "BLOCKED" in rows["reply"]
    assert "ready" in rows["mailer"]
    hint = "BLOCKED: reply/turns is stuck at index 1 until `a2pg redrive s1 reply 1 --lane turns"
    assert hint in result.out
    data = json.loads(cli("cursors", "s1", "--json", "--dsn", dsn).out)
    reply = next(c for c in data if c["consumer"] == "reply")
    assert reply["blocked"] is True
    assert reply["kind"] == "lane"
    assert reply["dispatch"]["last_error"].startswith("Traceback")


def test_dead_letters_everywhere_and_per_session(cli: Cli, dsn: str) -> None:
    everywhere = cli("dead-letters", "--dsn", dsn)
    assert everywhere.code == 0
    row = everywhere.out.splitlines()[2].split()
    assert row[:6] == ["s1", "reply", "turns", "1", "chat.user", "BLOCKED"]
    assert "RuntimeError: model crashed" in everywhere.out
    assert "Traceback" not in everywhere.out  # the gist of the error only
    assert cli("dead-letters", "s1", "--dsn", dsn).out == everywhere.out
    assert cli("dead-letters", "s2", "--dsn", dsn).out == "no dead letters\n"
    data = json.loads(cli("dead-letters", "s1", "--json", "--dsn", dsn).out)
    assert data[0]["blocked"] is True
    assert data[0]["event"]["index"] == 1


def test_redrive_skip_unblocks_the_lane(cli: Cli, dsn: str) -> None:
    result = cli("redrive", "s1", "reply", "1", "--skip", "--dsn", dsn)
    assert result.code == 0, result
    assert result.out == "redriven (skip): s1 reply@1; pending work: yes\n"
    again = cli("redrive", "s1", "reply", "1", "--skip", "--dsn", dsn)
    assert again.code == 5
    assert "no dead-lettered head of consumer 'reply' at index 1" in again.err
    cursors = json.loads(cli("cursors", "s1", "--json", "--dsn", dsn).out)
    reply = next(c for c in cursors if c["consumer"] == "reply")
    assert (reply["head"], reply["blocked"]) == (2, False)


def test_redrive_retry_json(cli: Cli, dsn: str) -> None:
    result = cli("redrive", "s1", "reply", "1", "--retry", "--json", "--dsn", dsn)
    assert json.loads(result.out) == {
        "session_id": "s1",
        "consumer": "reply",
        "index": 1,
        "action": "retry",
        "redriven": True,
        "has_pending": True,
    }


async def populate_both_dead(dsn: str) -> None:
    """Session "both": event 1 targets reply alone and on lane turns; both heads dead."""
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        targets = (Target("reply"), Target("reply", "turns"))
        await store.append("both", [NewEvent("chat.user", None, targets=targets)])
        claimed = await store.claim_available("both", holder="w1", ttl=30)
        assert isinstance(claimed, Claimed)
        for head in claimed.heads:
            failed = await store.fail_attempt(
                "both",
                consumer=head.consumer,
                lane=head.lane,
                index=head.index,
                attempt=head.attempt,
                error="boom",
                max_failures=1,
            )
            assert failed.outcome == "dead_lettered"
    finally:
        await store.close()


def dead_lanes(cli: Cli, dsn: str, session: str) -> list[str | None]:
    letters = json.loads(cli("dead-letters", session, "--json", "--dsn", dsn).out)
    return [letter["lane"] for letter in letters]


def test_redrive_lane_and_event_cursor_pick_the_head(cli: Cli, dsn: str) -> None:
    asyncio.run(populate_both_dead(dsn))
    assert dead_lanes(cli, dsn, "both") == [None, "turns"]
    lane = cli("redrive", "both", "reply", "1", "--skip", "--lane", "turns", "--dsn", dsn)
    assert lane.code == 0, lane
    assert lane.out == "redriven (skip): both reply@1 on lane 'turns'; pending work: no\n"
    assert dead_lanes(cli, dsn, "both") == [None]
    again = cli("redrive", "both", "reply", "1", "--retry", "--lane", "turns", "--dsn", dsn)
    assert again.code == 5
    assert "no dead-lettered head of consumer 'reply' at index 1 on lane 'turns'" in again.err
    assert dead_lanes(cli, dsn, "both") == [None]
    event = cli(
        "redrive", "both", "reply", "1", "--retry", "--event-cursor", "--json", "--dsn", dsn
    )
    assert event.code == 0, event
    assert json.loads(event.out) == {
        "session_id": "both",
        "consumer": "reply",
        "index": 1,
        "action": "retry",
        "redriven": True,
        "has_pending": True,
        "lane": None,
    }
    assert dead_lanes(cli, dsn, "both") == []


def test_redrive_of_a_lane_with_no_dead_head_exits_5(cli: Cli, dsn: str) -> None:
    """s1's reply is dead on lane turns, not on its event cursor nor on another lane."""
    for cursor in (["--event-cursor"], ["--lane", "other"]):
        result = cli("redrive", "s1", "reply", "1", "--skip", *cursor, "--dsn", dsn)
        assert result.code == 5, result
    assert dead_lanes(cli, dsn, "s1") == ["turns"]
    json_out = cli(
        "redrive", "s1", "reply", "1", "--skip", "--lane", "turns", "--json", "--dsn", dsn
    )
    assert json.loads(json_out.out)["lane"] == "turns"


def test_redrive_refuses_an_empty_lane(cli: Cli, dsn: str) -> None:
    result = cli("redrive", "s1", "reply", "1", "--skip", "--lane", "", "--dsn", dsn)
    assert result.code == 2
    assert "lane" in result.err
    assert dead_lanes(cli, dsn, "s1") == ["turns"]


@pytest.mark.parametrize(
    "argv",
    [
        ["cursors", "nope"],
        ["dead-letters", "nope"],
        ["redrive", "nope", "c", "1", "--retry"],
        ["tail", "nope", "--no-follow"],
    ],
    ids=" ".join,
)
def test_unknown_session_exits_5(cli: Cli, dsn: str, argv: list[str]) -> None:
    result = cli(*argv, "--dsn", dsn)
    assert result.code == 5
    assert result.err == "a2pg: error: unknown session 'nope'\n"


def test_tail_without_follow_prints_stored_events(cli: Cli, dsn: str) -> None:
    result = cli("tail", "s1", "--no-follow", "--dsn", dsn)
    assert [line.split()[0] for line in result.out.splitlines()] == ["1", "2", "3"]
    after = cli("tail", "s1", "--no-follow", "--after", "2", "--json", "--dsn", dsn)
    events = [json.loads(line) for line in after.out.splitlines()]
    assert [(e["index"], e["type"]) for e in events] == [(3, "job")]


def test_tail_follows_new_events_and_stops_cleanly_on_sigint(dsn: str) -> None:
    from a2pg.postgres import PostgresStore

    proc = subprocess.Popen(
        [str(A2PG), "tail", "s2", "--json", "--dsn", dsn],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["index"] == 1

        async def append() -> None:
            store = await PostgresStore.open(dsn)
            try:
                await store.append("s2", [NewEvent("note", "live")])
            finally:
                await store.close()

        asyncio.run(append())
        live = json.loads(proc.stdout.readline())
        assert (live["index"], live["payload"]) == (2, "live")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        assert proc.stderr is not None
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_session_whose_only_work_is_blocked_never_reads_as_idle(
    cli: Cli, postgres_dsn: str
) -> None:
    """The dead head at index 1 holds back 20 events: pending 0, blocked 20, in words too."""

    async def blocked() -> None:
        from a2pg.postgres import PostgresStore

        store = await PostgresStore.open(postgres_dsn)
        try:
            lane = (Target("reply", "turns"),)
            await store.append("s", [NewEvent("chat.user", n, targets=lane) for n in range(21)])
            claimed = await store.claim_available("s", holder="w1", ttl=30)
            assert isinstance(claimed, Claimed)
            [head] = claimed.heads
            failed = await store.fail_attempt(
                "s", consumer="reply", lane="turns", index=1, attempt=head.attempt,
                error="boom", max_failures=1,
            )  # fmt: skip
            assert failed.outcome == "dead_lettered"
        finally:
            await store.close()

    asyncio.run(blocked())
    lines = cli("sessions", "--dsn", postgres_dsn).out.splitlines()
    assert lines[2].split()[:6] == ["s", "21", "0", "0", "20", "1"]
    assert lines[3] == "session s: pending 0, blocked 20 behind 1 dead letter: see `a2pg cursors s`"
