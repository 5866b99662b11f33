"""The audit log of the operator commands, read back after each: one entry per action the
store ran (found nothing to do included), none for a refused command or a dry run; and
``a2pg audit`` listing it, newest first, in pages."""

from __future__ import annotations

import getpass
import json
import socket
from datetime import UTC, datetime
from typing import Any

import pytest

from a2pg.models import AuditEntry, NewEvent, Target, WorkerBeat
from a2pg.postgres import PostgresStore

from .conftest import Cli
from .stores import with_store
from .test_redrive_bulk import dead_letter

ACTOR = f"cli:{getpass.getuser()}@{socket.gethostname()}"
"""Who the commands run as, by this machine."""
LONG_AGO = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    """d1: a dead letter of mailer (event cursor) and one of reply on lane turns; d2: one
    of mailer; live: a pending head of c on lane l, then a second event queued."""

    async def populate(store: PostgresStore) -> None:
        await dead_letter(store, "d1", Target("mailer"), "boom")
        await dead_letter(store, "d1", Target("reply", "turns"), "crash")
        await dead_letter(store, "d2", Target("mailer"), "boom")
        lane = [Target("c", "l")]
        await store.append("live", [NewEvent("a", targets=lane), NewEvent("b", targets=lane)])

    with_store(postgres_dsn, populate)
    return postgres_dsn


def log(dsn: str) -> list[AuditEntry]:
    """The whole audit log, newest first."""
    return with_store(dsn, lambda store: store.audit_log(limit=1000))


def only(dsn: str) -> AuditEntry:
    [entry] = log(dsn)
    assert entry.actor == ACTOR
    assert entry.id is not None and entry.at is not None
    return entry


def fields(entry: AuditEntry) -> tuple[Any, ...]:
    return (entry.action, entry.session_id, entry.consumer, entry.lane, entry.index)


# -- redrive ---------------------------------------------------------------------------


def test_redriving_one_head_records_it(cli: Cli, dsn: str) -> None:
    assert cli("redrive", "d1", "reply", "2", "--retry", "--lane", "turns", "--dsn", dsn).code == 0
    entry = only(dsn)
    assert fields(entry) == ("redrive.retry", "d1", "reply", "turns", 2)
    assert entry.detail == {"outcome": "redriven", "cursor": "lane"}


def test_a_redrive_finding_no_dead_head_records_its_outcome(cli: Cli, dsn: str) -> None:
    result = cli("redrive", "d1", "mailer", "2", "--skip", "--event-cursor", "--dsn", dsn)
    assert result.code == 5, result
    entry = only(dsn)
    assert fields(entry) == ("redrive.skip", "d1", "mailer", None, 2)
    assert entry.detail == {"outcome": "not_found", "cursor": "event"}


def test_a_refused_redrive_records_nothing(cli: Cli, dsn: str) -> None:
    assert cli("redrive", "nowhere", "mailer", "1", "--retry", "--dsn", dsn).code == 5
    assert cli("redrive", "--retry", "--dsn", dsn).code == 2
    assert log(dsn) == []


def test_a_bulk_redrive_records_one_entry_with_its_filters_and_counts(cli: Cli, dsn: str) -> None:
    assert cli("redrive", "--skip", "--consumer", "mailer", "--dsn", dsn).code == 0
    entry = only(dsn)
    assert fields(entry) == ("redrive.skip", None, "mailer", None, None)
    assert entry.detail == {
        "filters": {"session": None, "consumer": "mailer", "error": None, "all": False},
        "matched": 2,
        "redriven": 2,
        "gone": 0,
        "outcome": "redriven",
    }


def test_a_bulk_redrive_matching_nothing_says_so_and_a_dry_run_records_nothing(
    cli: Cli, dsn: str
) -> None:
    assert cli("redrive", "--retry", "--all", "--dry-run", "--dsn", dsn).code == 0
    assert log(dsn) == []
    assert cli("redrive", "--retry", "--error", "no such error", "--dsn", dsn).code == 0
    entry = only(dsn)
    assert (entry.detail["matched"], entry.detail["outcome"]) == (0, "nothing")
    assert entry.detail["filters"]["error"] == "no such error"


# -- cancel, backfill ------------------------------------------------------------------


def test_cancelling_a_head_records_it(cli: Cli, dsn: str) -> None:
    assert cli("cancel", "live", "c", "1", "--dead-letter", "--dsn", dsn).code == 0
    entry = only(dsn)
    assert fields(entry) == ("cancel.dead_letter", "live", "c", None, 1)
    assert entry.detail == {"outcome": "cancelled", "cursor": "first", "held_until": None}


def test_a_cancel_finding_no_live_head_records_its_outcome(cli: Cli, dsn: str) -> None:
    assert cli("cancel", "live", "c", "2", "--skip", "--lane", "l", "--dsn", dsn).code == 5
    entry = only(dsn)
    assert fields(entry) == ("cancel.skip", "live", "c", "l", 2)
    assert entry.detail["outcome"] == "not_found"


def test_a_backfill_run_by_hand_is_recorded_and_one_that_has_none_is_not(
    cli: Cli, dsn: str
) -> None:
    assert cli("backfill", "nobody", "--dsn", dsn).code == 5
    assert log(dsn) == []
    registered = cli("consumers", "--register", "watch", "--backfill", "--dsn", dsn)
    assert registered.code == 0, registered
    assert cli("backfill", "watch", "--batch", "2", "--dsn", dsn).code == 0
    backfill, register = log(dsn)
    assert fields(register) == ("register", None, "watch", "log", None)
    assert register.detail == {"types": None, "backfill": True}
    assert fields(backfill) == ("backfill", None, "watch", None, None)
    assert backfill.detail == {"sessions": 3, "batch": 2}


# -- pause, resume, the registry, workers ----------------------------------------------


def test_pause_and_resume_record_one_entry_per_consumer(cli: Cli, dsn: str) -> None:
    assert cli("pause", "mailer", "typo", "--dsn", dsn).code == 0
    assert cli("resume", "mailer", "--dsn", dsn).code == 0
    resume, typo, mailer = log(dsn)
    assert [fields(e) for e in (mailer, typo, resume)] == [
        ("pause", None, "mailer", None, None),
        ("pause", None, "typo", None, None),
        ("resume", None, "mailer", None, None),
    ]
    assert [e.detail for e in (mailer, typo, resume)] == [
        {"unknown": False},
        {"unknown": True},
        {"unknown": False},
    ]


def test_registering_and_unregistering_are_recorded(cli: Cli, dsn: str) -> None:
    registered = cli("consumers", "--register", "feed", "--types", "a,b", "--dsn", dsn)
    assert registered.code == 0, registered
    assert cli("consumers", "--unregister", "feed", "--dsn", dsn).code == 0
    assert cli("consumers", "--unregister", "feed", "--dsn", dsn).code == 5  # not registered
    unregister, register = log(dsn)
    assert fields(register) == ("register", None, "feed", "log", None)
    assert register.detail == {"types": {"names": ["a", "b"], "count": 2}, "backfill": False}
    assert fields(unregister) == ("unregister", None, "feed", None, None)


def test_forgetting_stale_workers_is_recorded(cli: Cli, dsn: str) -> None:
    async def beat(store: PostgresStore) -> None:
        await store.heartbeat(
            WorkerBeat("w-gone", "box", 1, (), 1, LONG_AGO, 0, "1", interval=0.001)
        )

    with_store(dsn, beat)
    assert cli("workers", "--forget-stale", "--dsn", dsn).code == 0
    entry = only(dsn)
    assert fields(entry) == ("forget_workers", None, None, None, None)
    assert entry.detail == {"forgotten": 1, "holders": {"names": ["w-gone"], "count": 1}}


# -- retention --------------------------------------------------------------------------


def test_clearing_and_reclaiming_a_session_are_recorded(cli: Cli, dsn: str) -> None:
    assert cli("clear", "d2", "--if-last-index", "7", "--dsn", dsn).code == 1  # another head
    assert cli("clear", "d2", "--dsn", dsn).code == 0
    assert cli("reclaim", "d2", "--dsn", dsn).code == 0
    reclaim, cleared, not_cleared = log(dsn)
    assert fields(not_cleared) == ("clear", "d2", None, None, None)
    assert not_cleared.detail == {
        "outcome": "not_cleared",
        "if_last_index": 7,
        "clear_index": 0,
        "head": 1,
    }
    assert cleared.detail == {
        "outcome": "cleared",
        "if_last_index": None,
        "clear_index": 2,
        "head": 2,
    }
    assert fields(reclaim) == ("reclaim", "d2", None, None, None)
    assert reclaim.detail == {"deleted": 1}


def test_bulk_retention_records_one_entry_each_and_a_dry_run_none(cli: Cli, dsn: str) -> None:
    older = ["--older-than", "1s"]
    assert cli("clear", *older, "--dry-run", "--dsn", dsn).code == 0
    assert log(dsn) == []
    with_store(dsn, _age_everything)
    assert cli("clear", *older, "--include-unfinished", "--dsn", dsn).code == 0
    assert cli("reclaim", "--all", "--dsn", dsn).code == 0
    reclaim, clear = log(dsn)
    assert fields(clear) == ("clear", None, None, None, None)
    assert {k: clear.detail[k] for k in ("older_than", "matched", "cleared", "outcome")} == {
        "older_than": 1.0,
        "matched": 3,
        "cleared": 3,
        "outcome": "cleared",
    }
    assert reclaim.detail == {
        "all": True,
        "older_than": None,
        "examined": 3,
        "sessions": 3,
        "deleted": 5,
    }


async def _age_everything(store: PostgresStore) -> None:
    """Every event a minute old: idle for --older-than 1s."""
    async with store.pool.connection() as conn:
        await conn.execute("update a2_events set created_at = created_at - interval '1 minute'")


# -- a2pg audit -------------------------------------------------------------------------


def test_audit_lists_the_newest_first_in_pages(cli: Cli, dsn: str) -> None:
    assert cli("audit", "--dsn", dsn).out == "no audit entries\n"
    for name in ("a", "b", "c"):
        assert cli("pause", name, "--dsn", dsn).code == 0
    listed = cli("audit", "--json", "--dsn", dsn)
    assert listed.code == 0, listed
    entries = json.loads(listed.out)
    assert [(e["action"], e["consumer"], e["actor"]) for e in entries] == [
        ("pause", "c", ACTOR),
        ("pause", "b", ACTOR),
        ("pause", "a", ACTOR),
    ]
    assert set(entries[0]) == {
        *("id", "at", "actor", "action", "session_id", "consumer", "lane", "index", "detail"),
    }
    table = cli("audit", "--limit", "2", "--dsn", dsn)
    lines = table.out.splitlines()
    assert lines[0].split() == [
        *("AT", "ACTOR", "ACTION", "SESSION", "ID", "CONSUMER", "LANE", "INDEX", "DETAIL"),
    ]
    assert len(lines) == 5  # the header, its rule, two rows, the next page
    assert lines[-1] == f"older entries: a2pg audit --after {entries[1]['id']}"
    rest = cli("audit", "--after", entries[1]["id"], "--json", "--dsn", dsn)
    assert [e["consumer"] for e in json.loads(rest.out)] == ["a"]


def test_audit_refuses_a_bad_limit(cli: Cli, dsn: str) -> None:
    assert cli("audit", "--limit", "0", "--dsn", dsn).code == 2
    result = cli("audit", "--limit", "10001", "--dsn", dsn)
    assert result.code == 2 and "Limits.max_page_size" in result.err


def test_the_dashboards_entries_read_back_here_too(cli: Cli, dsn: str) -> None:
    async def record(store: PostgresStore) -> None:
        await store.record_audit(AuditEntry("alice", "resume", consumer="mailer"))

    with_store(dsn, record)
    [entry] = json.loads(cli("audit", "--json", "--dsn", dsn).out)
    assert (entry["actor"], entry["action"], entry["detail"]) == ("alice", "resume", {})
