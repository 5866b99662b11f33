"""Notifications carry nothing trusted: any role that may connect can notify the channel,
and the worst a forged or malformed one can do is cost a read."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from a2pg import NewEvent
from a2pg.postgres import PostgresStore
from a2pg.postgres.streams import MAX_CHANNEL_BYTES, channel_name, parse_notification
from tests.postgres.support import TIMEOUT, work

HUGE_HEAD = 2**63 - 1


@pytest.fixture
def forger(postgres_dsn: str) -> Iterator[str]:
    """A DSN of a login role with no privilege but CONNECT (which PUBLIC has)."""
    role = f"a2pg_forger_{uuid.uuid4().hex[:12]}"
    password = uuid.uuid4().hex
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("create role {} login password {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
    try:
        yield make_conninfo(postgres_dsn, user=role, password=password)
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s",
                (role,),
            )
            conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


def notify(dsn: str, *payloads: str, channel: str = "a2pg_public") -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for payload in payloads:
            conn.execute("select pg_catalog.pg_notify(%s, %s)", (channel, payload))


@pytest.mark.postgres
async def test_a_forged_huge_head_does_not_stop_a_stream(
    store: PostgresStore, postgres_dsn: str, forger: str
) -> None:
    with psycopg.connect(forger, autocommit=True) as conn:
        row = conn.execute("select has_table_privilege('a2_events', 'select')").fetchone()
        assert row == (False,)  # the forger can read nothing of the store
    writer = await PostgresStore.open(postgres_dsn)
    stream = store.stream("s")
    try:
        await writer.append("s", [NewEvent("first")], consumers=[])
        assert (await asyncio.wait_for(anext(stream), TIMEOUT)).index == 1
        pending = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0.5)  # the stream read on, found nothing and waits
        notify(forger, json.dumps({"session_id": "s", "head": HUGE_HEAD}))
        await asyncio.sleep(0.5)  # the listener took the forgery in, and polled
        await writer.append("s", work(2), consumers=[])
        second = await asyncio.wait_for(pending, TIMEOUT)
        third = await asyncio.wait_for(anext(stream), TIMEOUT)
        assert [second.index, third.index] == [2, 3]
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await writer.close()


@pytest.mark.postgres
async def test_malformed_payloads_and_absurd_ids_are_ignored(
    store: PostgresStore, forger: str, caplog: pytest.LogCaptureFixture
) -> None:
    wakeups = store.wakeups()
    absurd = "x" * 300  # longer than any session id a store accepts
    try:
        await asyncio.wait_for(store._listener.connected.wait(), TIMEOUT)
        with caplog.at_level(logging.DEBUG, logger="a2pg.postgres.streams"):
            notify(
                forger,
                "not json",
                "[]",
                "null",
                json.dumps({"session_id": 5}),
                json.dumps({"session_id": ""}),
                json.dumps({"session_id": absurd}),
                json.dumps({"head": 3}),
                '{"a": ' + "[" * 3900 + "]" * 3900 + "}",
                json.dumps({"session_id": "real"}),
            )
            seen: list[str | None] = []
            while "real" not in seen:
                seen.append(await asyncio.wait_for(anext(wakeups), TIMEOUT))
        assert set(seen) <= {None, "real"}
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]  # said once, not 8 times
        assert store._listener._task is not None and not store._listener._task.done()
    finally:
        await wakeups.aclose()


def test_a_payload_names_a_session_and_nothing_else_counts() -> None:
    assert parse_notification('{"session_id": "s", "head": 5}', 256) == ("s", None)
    assert parse_notification('{"session_id": "s"}', 256) == ("s", None)
    assert parse_notification('{"session_id": "s", "head": "junk"}', 256) == ("s", None)
    for payload in ("", "x", "[]", "1", '{"session_id": 1}', '{"session_id": ""}', '{"s": 1}'):
        assert parse_notification(payload, 256) is None, payload
    assert parse_notification(json.dumps({"session_id": "x" * 257}), 256) is None
    assert parse_notification('{"a": ' + "[" * 3900 + "]" * 3900 + "}", 256) is None


def test_a_payload_may_name_its_shard_and_a_forged_one_is_dropped() -> None:
    assert parse_notification('{"session_id": "s", "shard": 102008}', 256) == ("s", 102008)
    assert parse_notification('{"session_id": "s"}', 256) == ("s", None)
    for shard in ('"102008"', "true", "1.5", "null", "[1]"):
        payload = '{"session_id": "s", "shard": ' + shard + "}"
        assert parse_notification(payload, 256) == ("s", None), payload
    assert parse_notification('{"shard": 102008}', 256) is None


def test_channels_of_long_schemas_sharing_a_prefix_differ() -> None:
    prefix = "tenant_" + "x" * 60
    first, second = channel_name(prefix + "_a"), channel_name(prefix + "_b")
    assert first != second
    assert len(first.encode()) <= MAX_CHANNEL_BYTES and len(second.encode()) <= MAX_CHANNEL_BYTES
    assert channel_name("public") == "a2pg_public"
    fits = "s" * (MAX_CHANNEL_BYTES - len("a2pg_"))
    assert channel_name(fits) == "a2pg_" + fits
    assert channel_name(fits + "s") != "a2pg_" + fits
    wide = "é" * 40  # two bytes each: cut on a character boundary
    assert len(channel_name(wide).encode()) <= MAX_CHANNEL_BYTES
    assert channel_name(wide) != channel_name(wide + "é")


@pytest.mark.postgres
async def test_a_store_in_a_long_schema_hears_notifications(postgres_server_dsn: str) -> None:
    from a2pg.postgres.migrate import upgrade
    from a2pg.testing import scratch_database

    schemas = ["tenant_" + "x" * 55 + suffix for suffix in ("a", "b")]
    with scratch_database(postgres_server_dsn, "a2pg_channels") as dsn:
        for schema in schemas:
            upgrade(dsn, schema=schema)
        # Polls too rarely to matter: only a NOTIFY on its own channel can wake it.
        reader = await PostgresStore.open(dsn, schema=schemas[0], poll_interval=600)
        writers = [await PostgresStore.open(dsn, schema=schema) for schema in schemas]
        wakeups = reader.wakeups()
        try:
            await asyncio.wait_for(reader._listener.connected.wait(), TIMEOUT)
            assert reader._listener.hears_itself is not False
            await writers[1].append("other", work(), consumers=[])
            await writers[0].append("mine", work(), consumers=[])
            seen: list[str | None] = []
            while "mine" not in seen:
                seen.append(await asyncio.wait_for(anext(wakeups), TIMEOUT))
            assert "other" not in seen
        finally:
            await wakeups.aclose()
            for writer in writers:
                await writer.close()
            await reader.close()
