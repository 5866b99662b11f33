"""``a2pg consumers``: the registry with each consumer's work, and ``--unregister``."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from a2pg.models import Claimed, Consumer, LogSpec, NewEvent, Target, WorkerBeat
from a2pg.postgres import PostgresStore

from .conftest import Cli
from .stores import with_store

AUDIT = Consumer("audit", LogSpec(lane="log", types=("order.placed", "order.paid")))
ARCHIVE = Consumer("archive", LogSpec(lane="all"))


def registered(dsn: str) -> list[str]:
    consumers = with_store(dsn, lambda store: store.registered_consumers())
    return sorted(c.name for c in consumers)


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    async def register(store: PostgresStore) -> None:
        await store.register_consumers([AUDIT, ARCHIVE])

    with_store(postgres_dsn, register)
    return postgres_dsn


def test_unregister(cli: Cli, dsn: str) -> None:
    result = cli("consumers", "--unregister", "audit", "--dsn", dsn)
    assert result.code == 0, result
    assert result.out == "unregistered: audit\n"
    assert registered(dsn) == ["archive"]


def test_unregister_several_json(cli: Cli, dsn: str) -> None:
    argv = ["--unregister", "archive", "--unregister", "audit", "--unregister", "archive"]
    result = cli("consumers", *argv, "--json", "--dsn", dsn)
    assert result.code == 0, result
    assert json.loads(result.out) == {"unregistered": ["archive", "audit"]}
    assert registered(dsn) == []


def test_unregister_an_unknown_name_exits_5_and_unregisters_nothing(cli: Cli, dsn: str) -> None:
    result = cli("consumers", "--unregister", "audit", "--unregister", "nope", "--dsn", dsn)
    assert result.code == 5
    assert result.out == ""
    assert result.err == "a2pg: error: not registered: 'nope' (nothing unregistered)\n"
    assert registered(dsn) == ["archive", "audit"]


def test_unregister_a_bad_name_exits_2(cli: Cli, dsn: str) -> None:
    result = cli("consumers", "--unregister", "", "--dsn", dsn)
    assert result.code == 2
    assert result.err.startswith("a2pg: error: ")
    assert result.err.count("\n") == 1
    assert registered(dsn) == ["archive", "audit"]


@pytest.fixture
def busy(postgres_dsn: str) -> str:
    """mailer: 2 ready heads (s1), 1 claimed (s2), 1 backing off (s3); reply: its lane in s4
    dead at index 1 with index 2 behind it; audit: registered, no work."""

    async def populate(store: PostgresStore) -> None:
        await store.register_consumers([AUDIT])
        mail = (Target("mailer"),)
        await store.append(
            "s1", [NewEvent("job", 1, targets=mail), NewEvent("job", 2, targets=mail)]
        )
        heads = {}
        for session in ("s2", "s3"):
            await store.append(session, [NewEvent("job", None, targets=mail)])
            claimed = await store.claim_available(session, holder="w", ttl=600)
            assert isinstance(claimed, Claimed)
            [heads[session]] = claimed.heads
        head = heads["s3"]
        failed = await store.fail_attempt(
            "s3",
            consumer="mailer",
            lane=None,
            index=head.index,
            attempt=head.attempt,
            error="boom",
            max_failures=5,
            retry_after=3600,
        )
        assert failed.outcome == "failed"
        turns = (Target("reply", "turns"),)
        await store.append("s4", [NewEvent("chat", n, targets=turns) for n in (1, 2)])
        claimed = await store.claim_available("s4", holder="w", ttl=600)
        assert isinstance(claimed, Claimed)
        [head] = claimed.heads
        failed = await store.fail_attempt(
            "s4",
            consumer="reply",
            lane="turns",
            index=head.index,
            attempt=head.attempt,
            error="boom",
            max_failures=1,
        )
        assert failed.outcome == "dead_lettered"

    with_store(postgres_dsn, populate)
    return postgres_dsn


def test_consumers_json(cli: Cli, busy: str) -> None:
    result = cli("consumers", "--json", "--dsn", busy)
    assert result.code == 0, result
    rows = {row["consumer"]: row for row in json.loads(result.out)}
    assert list(rows) == ["audit", "mailer", "reply"]
    counts = (
        "ready",
        "claimed",
        "backing_off",
        "scheduled",
        "dead_letters",
        "blocked_lanes",
        "blocked",
    )
    assert [rows["mailer"][c] for c in counts] == [2, 1, 1, 0, 0, 0, 0]
    assert [rows["reply"][c] for c in counts] == [0, 0, 0, 0, 1, 1, 1]
    assert [rows["audit"][c] for c in counts] == [0, 0, 0, 0, 0, 0, 0]
    assert rows["mailer"]["lag"] >= 0 and rows["mailer"]["blocked_age"] is None
    assert rows["reply"]["lag"] is None and rows["reply"]["blocked_age"] >= 0
    assert rows["audit"] == {
        "consumer": "audit",
        "registered": True,
        "served": False,
        "served_by": 0,
        "paused": False,
        "lane": "log",
        "types": ["order.placed", "order.paid"],
        "backfill": False,
        **dict.fromkeys(counts, 0),
        "lag": None,
        "blocked_age": None,
        "backfill_progress": None,
    }
    assert (rows["mailer"]["registered"], rows["mailer"]["served"]) == (False, False)


def test_consumers_table(cli: Cli, busy: str) -> None:
    result = cli("consumers", "--dsn", busy)
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert lines[0].split() == [
        "CONSUMER",
        "REGISTERED",
        "SERVED",
        "PAUSED",
        "LANE",
        "TYPES",
        "READY",
        "CLAIMED",
        "BACKING",
        "OFF",
        "SCHEDULED",
        "DEAD",
        "LETTERS",
        "BLOCKED",
        "LANES",
        "BLOCKED",
        "LAG",
        "BACKFILL",
    ]
    assert lines[2].split() == [
        "audit",
        "yes",
        "0",
        "log",
        "order.placed,order.paid",
        "0",
        "0",
        "0",
        "0",
        "0",
        "0",
        "0",
    ]
    assert lines[3].split()[:10] == ["mailer", "no", "0", "2", "1", "1", "0", "0", "0", "0"]
    assert lines[3].endswith("s")  # the lag, in seconds
    reply = lines[4].split()
    assert reply[:10] == ["reply", "no", "0", "0", "0", "0", "0", "1", "1", "1"]
    assert reply[10] == "blocked" and reply[11].endswith("s")  # no ready lag: the blocked age
    assert lines[5] == "consumer audit: registered, no live worker"
    assert lines[6].startswith("consumer reply: 1 lane blocked (the oldest for ")
    assert lines[6].endswith("), 1 event behind: see `a2pg dead-letters`")
    assert lines[7] == ""
    legend = "\n".join(lines[8:])
    assert legend.startswith("REGISTERED     yes: in the consumer registry")
    for column in ("SERVED", "PAUSED", "SCHEDULED", "BLOCKED LANES", "BLOCKED", "LAG", "BACKFILL"):
        assert f"\n{column} " in legend, column


def beat(holder: str, *consumers: str) -> WorkerBeat:
    return WorkerBeat(
        holder=holder,
        host="box",
        pid=7,
        consumers=consumers,
        concurrency=2,
        started_at=datetime.now(UTC),
        in_flight=0,
        version="0.1.0",
        interval=600.0,
    )


def test_live_workers_paused_consumers_and_backfills_are_shown(cli: Cli, dsn: str) -> None:
    """ghost: only a live worker names it (zeros, SERVED 1); mailer: paused with a ready head;
    audit: served, its backfill running; archive: registered, unserved."""

    async def populate(store: PostgresStore) -> None:
        await store.append("s1", [NewEvent("job", 1, targets=(Target("mailer"),))])
        await store.append("s2", [NewEvent("order.placed", 2)], consumers=[])
        await store.register_consumers(
            [Consumer("audit", LogSpec(types=("order.placed",), backfill=True))]
        )
        await store.pause_consumers(["mailer"])
        await store.heartbeat(beat("w-1", "ghost", "audit"))
        await store.heartbeat(beat("w-2", "audit"))

    with_store(dsn, populate)
    result = cli("consumers", "--dsn", dsn)
    assert result.code == 0, result
    rows = {line.split()[0]: line for line in result.out.splitlines()[2:6]}
    assert list(rows) == ["archive", "audit", "ghost", "mailer"]
    assert rows["ghost"].split() == ["ghost", "no", "1", *["0"] * 7]
    assert rows["mailer"].split()[:4] == ["mailer", "no", "0", "yes"]
    assert rows["audit"].split()[:3] == ["audit", "yes", "2"]
    assert rows["audit"].endswith("running 0 sessions")
    data = {
        row["consumer"]: row for row in json.loads(cli("consumers", "--json", "--dsn", dsn).out)
    }
    assert (data["ghost"]["served_by"], data["ghost"]["served"], data["ghost"]["registered"]) == (
        1,
        True,
        False,
    )
    assert data["mailer"]["paused"] is True and data["mailer"]["ready"] == 1
    progress = data["audit"]["backfill_progress"]
    assert progress["running"] is True and progress["sessions"] == 0
    assert progress["after"] is None and progress["done_at"] is None

    async def finish(store: PostgresStore) -> None:
        while True:
            done = await store.backfill("audit", limit=10)
            assert done is not None
            if not done.running:
                return

    with_store(dsn, finish)
    result = cli("consumers", "--dsn", dsn)
    [audit] = [line for line in result.out.splitlines() if line.startswith("audit ")]
    assert audit.endswith("done 2")
    progress = json.loads(cli("consumers", "--json", "--dsn", dsn).out)[1]["backfill_progress"]
    assert (progress["running"], progress["sessions"], progress["after"]) == (False, 2, "s2")


def test_no_consumers(cli: Cli, postgres_dsn: str) -> None:
    result = cli("consumers", "--dsn", postgres_dsn)
    assert (result.code, result.out) == (0, "no consumers\n")
    assert cli("consumers", "--json", "--dsn", postgres_dsn).out == "[]\n"
