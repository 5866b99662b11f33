"""The least-privilege claim of docs/operating/schemas-roles.md, against real PostgreSQL:
"Runtime roles need only SELECT, INSERT, UPDATE, DELETE on the a2_ tables and USAGE on
the schema; only `a2pg migrate` needs CREATE."

Each test works in a scratch database migrated (as the superuser) into schema ``a2``,
where PUBLIC lost every right on schema ``public`` and CREATE and TEMPORARY on the
database, and logs in as a role of its own (``LOGIN NOINHERIT``, a password in its DSN,
member of nothing, owner of nothing), dropped afterwards. The runtime role's whole
grant list is :func:`runtime_grants`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from a2pg import (
    Claimed,
    ClaimRef,
    Completed,
    Completion,
    Consumer,
    Head,
    LogSpec,
    NewEvent,
    SnapshotWrite,
    Target,
    Worker,
)
from a2pg.models import AuditEntry
from a2pg.postgres import PostgresStore
from a2pg.postgres.layout import TABLES, VERSION_TABLE
from a2pg.postgres.migrate import upgrade
from a2pg.testing import scratch_database, unique_name
from a2pg.worker import App
from tests.postgres.support import POLL_INTERVAL, TIMEOUT
from tests.worker.helpers import until

pytestmark = pytest.mark.postgres

SCHEMA = "a2"
PASSWORD = "Sekr1t-least-42"
MARKER = "Sekr1t"
"""In the password: must appear in no output."""
REPO = Path(__file__).resolve().parents[2]
A2PG = Path(sys.executable).parent / "a2pg"
CLI_TIMEOUT = 60.0
HOUR = 3600.0
"""The poll interval of a store whose live feeds may only hear NOTIFY within a test."""

Grants = Callable[[str], list[sql.SQL | sql.Composed]]
MakeRole = Callable[[Grants], str]


def _table(name: str) -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(SCHEMA), sql.Identifier(name))


def runtime_grants(role: str) -> list[sql.SQL | sql.Composed]:
    """Exactly what ``a2pg grants ROLE --schema a2`` prints (``a2pg.postgres.grants``),
    run as printed:

    - ``USAGE`` on schema ``a2``;
    - ``SELECT, INSERT, UPDATE, DELETE`` on ``a2_sessions``, ``a2_events``,
      ``a2_cursors``, ``a2_lane_events``, ``a2_snapshots``, ``a2_snapshot_history``,
      ``a2_snapshot_pins``, ``a2_presence``, ``a2_consumers`` and ``a2_workers``;
    - ``SELECT`` only on ``a2_meta`` (the layout check reads it);
    - nothing on ``a2_alembic_version``, and no sequences (the layout has none:
      :func:`test_the_grant_list_covers_the_whole_layout` checks it);
    - no CREATE on the database or any schema, no TEMPORARY, no TRUNCATE, no
      REFERENCES, no TRIGGER, no function of its own, no membership, no ownership.
    """
    printed = _run_cli("grants", role, "--schema", SCHEMA)
    assert printed.returncode == 0, printed
    assert printed.stdout.count("grant ") == 3, printed.stdout
    return [sql.SQL(printed.stdout)]  # one script, several statements, as psql would run it


def connect_only(role: str) -> list[sql.SQL | sql.Composed]:
    """Nothing beyond the CONNECT every role has on a new database."""
    return []


def usage_only(role: str) -> list[sql.SQL | sql.Composed]:
    """The schema, but none of its tables."""
    return [
        sql.SQL("grant usage on schema {} to {}").format(
            sql.Identifier(SCHEMA), sql.Identifier(role)
        )
    ]


def as_role(dsn: str, role: str) -> str:
    """``dsn``'s database, logged in as ``role`` with its password."""
    return make_conninfo(dsn, user=role, password=PASSWORD)


def lock_down(dsn: str) -> None:
    """PUBLIC keeps only CONNECT: no CREATE or TEMPORARY on the database, nothing on
    schema ``public`` (so nothing can lean on it either)."""
    dbname = str(conninfo_to_dict(dsn)["dbname"])
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("revoke all on schema public from public")
        conn.execute(
            sql.SQL("revoke create, temporary on database {} from public").format(
                sql.Identifier(dbname)
            )
        )


@pytest.fixture
def database(postgres_server_dsn: str) -> Iterator[str]:
    """A scratch database migrated into schema a2, locked down; the superuser's DSN."""
    with scratch_database(postgres_server_dsn, "a2pg_least") as dsn:
        upgrade(dsn, schema=SCHEMA)
        lock_down(dsn)
        yield dsn


@pytest.fixture
def make_role(postgres_server_dsn: str, database: str) -> Iterator[MakeRole]:
    """``make_role(grants)``: a new login role given exactly ``grants(role)`` in
    ``database``; dropped (with what it was granted) after the test."""
    made: list[str] = []

    def make(grants: Grants) -> str:
        role = unique_name("a2pg_least")
        with psycopg.connect(postgres_server_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("create role {} login noinherit password {}").format(
                    sql.Identifier(role), sql.Literal(PASSWORD)
                )
            )
        made.append(role)
        with psycopg.connect(database, autocommit=True) as conn, conn.transaction():
            for statement in grants(role):
                conn.execute(statement)
        return role

    try:
        yield make
    finally:
        for role in made:
            with psycopg.connect(postgres_server_dsn, autocommit=True) as conn:
                conn.execute(
                    "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s",
                    (role,),
                )
            with psycopg.connect(database, autocommit=True) as conn:
                conn.execute(sql.SQL("drop owned by {}").format(sql.Identifier(role)))
            with psycopg.connect(postgres_server_dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role)))


def assert_least(dsn: str, role: str) -> None:
    """``role`` is no superuser, member or owner, and may create nothing anywhere in the
    database behind ``dsn``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select rolsuper, rolinherit, rolcreatedb, rolcreaterole, rolbypassrls,"
            " rolreplication from pg_roles where rolname = %s",
            (role,),
        ).fetchone()
        assert row == (False, False, False, False, False, False)
        assert not conn.execute(
            "select 1 from pg_auth_members m join pg_roles r on r.oid = m.member"
            " where r.rolname = %s",
            (role,),
        ).fetchall()
        creatable = conn.execute(
            "select nspname from pg_namespace where has_schema_privilege(%s, oid, 'CREATE')",
            (role,),
        ).fetchall()
        assert creatable == []
        database_rights = conn.execute(
            "select has_database_privilege(%(r)s, current_database(), 'CREATE'),"
            " has_database_privilege(%(r)s, current_database(), 'TEMPORARY')",
            {"r": role},
        ).fetchone()
        assert database_rights == (False, False)
        owned = conn.execute(
            "select count(*) from pg_class c join pg_roles r on r.oid = c.relowner"
            " where r.rolname = %(r)s"
            " union all select count(*) from pg_namespace n join pg_roles r"
            " on r.oid = n.nspowner where r.rolname = %(r)s",
            {"r": role},
        ).fetchall()
        assert owned == [(0,), (0,)]


def test_the_grant_list_covers_the_whole_layout(database: str) -> None:
    """Every object of schema a2 is a table :func:`runtime_grants` names (or the version
    table only ``a2pg migrate`` touches), or one of their indexes: a new sequence,
    view or function would need a grant the list lacks."""
    with psycopg.connect(database, autocommit=True) as conn:
        kinds: dict[str, str] = dict(
            conn.execute(
                "select relname, relkind::text from pg_class c join pg_namespace n"
                " on n.oid = c.relnamespace where nspname = %s and relkind <> 'i'",
                (SCHEMA,),
            ).fetchall()
        )
        functions = conn.execute(
            "select proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace"
            " where nspname = %s",
            (SCHEMA,),
        ).fetchall()
    assert kinds == {name: "r" for name in (*TABLES, VERSION_TABLE)}
    assert functions == []


def _app(audited: list[int]) -> App:
    app = App()

    @app.consumer("reply")
    async def reply(head: Head) -> list[NewEvent]:
        return [NewEvent("assistant.message", {"to": head.index}, id=f"reply-{head.index}")]

    @app.consumer("flaky")
    async def flaky(head: Head) -> None:
        raise RuntimeError("always fails")

    @app.consumer("audit", log=LogSpec(types=("assistant.message",)))
    def audit(head: Head) -> None:
        audited.append(head.index)

    return app


async def _open(dsn: str, *, poll_interval: float) -> PostgresStore:
    return await PostgresStore.open(dsn, schema=SCHEMA, poll_interval=poll_interval)


async def test_a_runtime_role_runs_the_whole_workload(
    database: str, make_role: MakeRole, caplog: pytest.LogCaptureFixture
) -> None:
    role = make_role(runtime_grants)
    assert_least(database, role)
    dsn = as_role(database, role)
    caplog.set_level(logging.INFO)
    store = await _open(dsn, poll_interval=POLL_INTERVAL)
    # Polls hourly: what its streams and wakeups hear within a test came by NOTIFY.
    listener = await _open(dsn, poll_interval=HOUR)
    wakeups = listener.wakeups()
    stream = listener.stream("chat")
    try:
        async with store.pool.connection() as conn:
            cur = await conn.execute("select current_user")
            assert await cur.fetchone() == (role,)
        # The listener's first poll is over: from here on it hears only notifications.
        assert await asyncio.wait_for(anext(wakeups), TIMEOUT) is None

        await store.register_consumers([Consumer("watch", LogSpec())])
        assert [c.name for c in await store.registered_consumers()] == ["watch"]
        turn = NewEvent("user.message", {"text": "hi"}, targets=[Target("reply", lane="turns")])
        bill = NewEvent("invoice", {"n": 1}, targets=[Target("bill")])
        appended = await store.append("chat", [turn, bill])
        assert [event.index for event in appended.events] == [1, 2]
        assert appended.has_pending
        assert await asyncio.wait_for(anext(wakeups), TIMEOUT) == "chat"
        assert listener._listener.hears_itself is True
        streamed = [await asyncio.wait_for(anext(stream), TIMEOUT) for _ in range(2)]
        assert [event.index for event in streamed] == [1, 2]

        claimed = await store.claim_available("chat", holder="h1", ttl=30)
        assert isinstance(claimed, Claimed)
        heads = {(head.consumer, head.index): head for head in claimed.heads}
        assert set(heads) >= {("reply", 1), ("bill", 2), ("watch", 1)}
        renewed = await store.renew_claims(
            "chat", holder="h1", claims=[head.attempt_ref for head in claimed.heads], ttl=60
        )
        assert len(renewed.renewed) == len(claimed.heads)

        pin = ClaimRef("reply", "turns", 1)
        await store.put_snapshots("chat", "totals", [SnapshotWrite(1, {"n": 1}, pins=[pin])])
        await store.put_snapshots("chat", "totals", [SnapshotWrite(2, {"n": 2})])
        assert (await store.read_state("chat", "totals")).state == {"n": 2}
        assert (await store.read_state("chat", "totals", through=1)).state == {"n": 1}

        reply = heads[("reply", 1)]
        done = await store.complete_attempt(
            "chat",
            consumer="reply",
            lane="turns",
            index=1,
            attempt=reply.attempt,
            events=[NewEvent("assistant.message", {"text": "hello"}, id="reply-1")],
        )
        assert isinstance(done, Completed)
        [returned] = done.events
        assert (returned.id, returned.index) == ("reply-1", 3)
        assert returned.cause is not None and returned.cause.consumer == "reply"
        # The completion notified: the listener's stream reads the returned event.
        assert (await asyncio.wait_for(anext(stream), TIMEOUT)).id == "reply-1"

        billed = heads[("bill", 2)]
        failed = await store.fail_attempt(
            "chat", consumer="bill", lane=None, index=2, attempt=billed.attempt,
            error="boom", max_failures=1,
        )  # fmt: skip
        assert failed.outcome == "dead_lettered"
        assert [head.index for head in await store.dead_letters("chat")] == [2]
        assert (await store.redrive("chat", consumer="bill", index=2, action="retry")).redriven
        again = await store.claim_any(holder="h2", ttl=30, consumers=[Consumer("bill")])
        assert [head.index for head in again] == [2]
        released = await store.release_claims(
            "chat", holder="h2", claims=[head.attempt_ref for head in again]
        )
        assert len(released.released) == 1
        [retry] = await store.claim_any(holder="h3", ttl=30, consumers=[Consumer("bill")])
        backing_off = await store.fail_attempt(
            "chat", consumer="bill", lane=None, index=2, attempt=retry.attempt,
            error="again", max_failures=5, retry_after=60,
        )  # fmt: skip
        assert backing_off.outcome == "failed"

        watch = heads[("watch", 1)]
        [audited] = await store.complete_attempts(
            [Completion("chat", "watch", watch.lane, 1, watch.attempt)]
        )
        assert isinstance(audited, Completed)

        now = datetime.now(UTC)
        written = await store.presence.write("room", "p1", {"typing": True}, at=now, seen=1, ttl=30)
        assert written == {"typing": True}
        [row] = await store.presence.read("room")
        assert (row.participant, row.field, row.value) == ("p1", "typing", True)

        assert [info.session_id for info in await store.sessions()] == ["chat"]
        assert await store.cursors("chat")
        assert [event.index for event in await store.read("chat")] == [1, 2, 3]

        cleared = await store.clear("chat")
        assert cleared.cleared
        # An id below the clear marker may be appended again.
        reused = await store.append("chat", [NewEvent("again", id="reply-1")], consumers=[])
        assert [event.index for event in reused.events] == [cleared.clear_index + 1]
        while not (await store.reclaim("chat")).done:
            pass
        after = await store.read("chat", after=cleared.clear_index)
        assert [event.id for event in after] == ["reply-1"]

        audited_indexes: list[int] = []
        app = _app(audited_indexes)
        await store.unregister_consumers(["watch"])
        await store.register_consumers(app.log_consumers)
        await store.append(
            "w1",
            [
                *(
                    NewEvent("user.message", {"n": n}, targets=[Target("reply", "t")])
                    for n in range(3)
                ),
                NewEvent("poison", targets=[Target("flaky")]),
            ],
        )
        worker = Worker(store, app, concurrency=4, max_failures=1, poll_interval=POLL_INTERVAL)
        await asyncio.wait_for(worker.run_until_idle(), TIMEOUT)
        events = await store.read("w1")
        assert sorted(e.id for e in events if e.type == "assistant.message") == [
            "reply-1",
            "reply-2",
            "reply-3",
        ]
        assert sorted(audited_indexes) == [e.index for e in events if e.type == "assistant.message"]
        assert [head.consumer for head in await store.dead_letters("w1")] == ["flaky"]
        assert worker.stats.completed >= 6

        await store.unregister_consumers(["audit"])
        assert await store.registered_consumers() == []
    finally:
        await wakeups.aclose()
        await stream.aclose()  # type: ignore[attr-defined]
        await listener.close()
        await store.close()
    # A permission error the listener or the worker swallowed would have been logged.
    assert "permission denied" not in caplog.text
    assert "InsufficientPrivilege" not in caplog.text
    assert "lost its connection" not in caplog.text


async def test_a_runtime_role_writes_and_reads_the_audit_log(
    database: str, make_role: MakeRole
) -> None:
    """The operator commands record their actions as the role they run as: the runtime
    grants (derived from the layout's tables, ``a2_audit`` among them) suffice."""
    role = make_role(runtime_grants)
    dsn = as_role(database, role)
    paused = _run_cli("pause", "bill", "--dsn", dsn, "--schema", SCHEMA)
    assert paused.returncode == 0, paused
    listed = _run_cli("audit", "--json", "--dsn", dsn, "--schema", SCHEMA)
    assert listed.returncode == 0, listed
    assert '"action": "pause"' in listed.stdout and '"consumer": "bill"' in listed.stdout
    store = await _open(dsn, poll_interval=POLL_INTERVAL)
    try:
        stored = await store.record_audit(AuditEntry("ops", "resume", consumer="bill"))
        assert [entry.action for entry in await store.audit_log()] == ["resume", "pause"]
        assert (await store.audit_log(limit=1)) == [stored]
    finally:
        await store.close()


def _run_cli(*argv: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """The installed ``a2pg`` script, as a deploy job runs it (no ambient A2PG_ settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2PG_")}
    return subprocess.run(
        [str(A2PG), *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=timeout,
        check=False,
    )


def _schema_exists(dsn: str, schema: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("select to_regnamespace(%s) is not null", (schema,)).fetchone()
        assert row is not None
        return bool(row[0])


def test_the_runtime_role_can_check_but_not_migrate(
    database: str, make_role: MakeRole, postgres_server_dsn: str
) -> None:
    role = make_role(runtime_grants)
    dsn = as_role(database, role)
    assert MARKER in dsn

    check = _run_cli("check", "--dsn", dsn, "--schema", SCHEMA)
    assert check.returncode == 0, check
    assert check.stdout.startswith(f"ok: schema '{SCHEMA}' has the a2pg layout")

    # A current layout: nothing to do, which needs no right beyond the runtime grants (a
    # deploy that runs `a2pg migrate` as every role it starts passes once it is current).
    current = _run_cli("migrate", "--dsn", dsn, "--schema", SCHEMA)
    assert current.returncode == 0, current
    assert "Traceback" not in current.stderr

    # A fresh schema: the migration would create it, which needs CREATE on the database.
    migrate = _run_cli("migrate", "--dsn", dsn, "--schema", "fresh")
    assert migrate.returncode == 1, migrate  # "a database error", as `a2pg --help` says
    assert migrate.stdout == ""
    assert migrate.stderr.startswith("a2pg: error: database error: permission denied for database")
    # ... and says which rights a migration needs, and where a runtime role's come from.
    assert migrate.stderr.endswith(
        " (the migrating role must own schema 'fresh', or have CREATE on the database to"
        " create it; a runtime role needs only what `a2pg grants ROLE --schema fresh`"
        " prints, granted by the owner)\n"
    ), migrate.stderr
    assert "Traceback" not in migrate.stderr
    assert MARKER not in migrate.stderr
    assert not _schema_exists(database, "fresh")

    # A fresh database, where the role may only connect.
    with scratch_database(postgres_server_dsn, "a2pg_least_fresh") as fresh:
        lock_down(fresh)
        fresh_dsn = as_role(fresh, role)
        migrate = _run_cli("migrate", "--dsn", fresh_dsn)
        assert migrate.returncode == 1, migrate
        assert migrate.stderr.startswith("a2pg: error: database error: permission denied")
        assert MARKER not in migrate.stdout + migrate.stderr
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as raised:
            upgrade(fresh_dsn, schema=SCHEMA)
        assert str(raised.value).startswith("permission denied for database")
        assert MARKER not in str(raised.value)
        with psycopg.connect(fresh, autocommit=True) as conn:
            tables = conn.execute(
                "select count(*) from pg_class where relname like 'a2\\_%%'"
            ).fetchone()
        assert tables == (0,)


def test_a_role_owning_its_schema_migrates_without_create_on_the_database(
    postgres_server_dsn: str,
) -> None:
    """The usual split: a DBA creates the schema for the application's owner role, which
    has no CREATE on the database; CREATE SCHEMA IF NOT EXISTS would be refused."""
    with scratch_database(postgres_server_dsn, "a2pg_least_owner") as fresh:
        lock_down(fresh)
        role = unique_name("a2pg_owner")
        with psycopg.connect(fresh, autocommit=True) as conn:
            conn.execute(
                sql.SQL("create role {} login password {}").format(
                    sql.Identifier(role), sql.Literal(PASSWORD)
                )
            )
            conn.execute(
                sql.SQL("create schema {} authorization {}").format(
                    sql.Identifier(SCHEMA), sql.Identifier(role)
                )
            )
        try:
            migrate = _run_cli("migrate", "--dsn", as_role(fresh, role), "--schema", SCHEMA)
            assert migrate.returncode == 0, migrate
            check = _run_cli("check", "--dsn", as_role(fresh, role), "--schema", SCHEMA)
            assert check.returncode == 0, check
        finally:
            with psycopg.connect(fresh, autocommit=True) as conn:
                conn.execute(sql.SQL("drop schema {} cascade").format(sql.Identifier(SCHEMA)))
                conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


REFUSALS = pytest.mark.parametrize(
    ("grants", "refused"),
    [
        (connect_only, f"permission denied for schema {SCHEMA}"),
        (usage_only, "permission denied for table a2_meta"),
    ],
    ids=["connect-only", "usage-only"],
)
"""Roles short of the runtime grants, and what PostgreSQL tells them at the layout check."""


@REFUSALS
async def test_a_role_without_the_grants_cannot_open_the_store(
    database: str, make_role: MakeRole, grants: Grants, refused: str
) -> None:
    dsn = as_role(database, make_role(grants))
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as raised:
        await _open(dsn, poll_interval=POLL_INTERVAL)
    assert str(raised.value) == refused
    assert MARKER not in str(raised.value)


@REFUSALS
def test_a_worker_without_the_grants_exits_at_once_naming_the_refusal(
    database: str, make_role: MakeRole, grants: Grants, refused: str
) -> None:
    dsn = as_role(database, make_role(grants))
    # --wait retries an unreachable database; a refusal is no reason to wait.
    worker = _run_cli(
        "worker", "tests.cli.sample_app:app", "--dsn", dsn, "--schema", SCHEMA, "--wait", "120",
        timeout=30,
    )  # fmt: skip
    assert worker.returncode == 1, worker
    assert worker.stderr.endswith(f"a2pg: error: database error: {refused}\n")
    assert "Traceback" not in worker.stderr
    assert MARKER not in worker.stdout + worker.stderr


async def test_a_grant_revoked_under_a_running_listener_is_named_not_taken_for_an_outage(
    database: str, make_role: MakeRole, caplog: pytest.LogCaptureFixture
) -> None:
    """A refusal is not a lost connection: the log says what to fix, at ERROR."""
    role = make_role(runtime_grants)
    listener = await _open(as_role(database, role), poll_interval=POLL_INTERVAL)
    wakeups = listener.wakeups()
    try:
        assert await asyncio.wait_for(anext(wakeups), TIMEOUT) is None  # listening
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(
                sql.SQL("revoke select on {} from {}").format(
                    _table("a2_cursors"), sql.Identifier(role)
                )
            )

        await until(lambda: "listener was refused by the database" in caplog.text, within=TIMEOUT)
    finally:
        await wakeups.aclose()
        await listener.close()
    [level] = {r.levelno for r in caplog.records if "listener was refused" in r.getMessage()}
    assert level == logging.ERROR
    assert "(InsufficientPrivilege: permission denied for table a2_cursors)" in caplog.text
    assert "lost its connection" not in caplog.text
    assert MARKER not in caplog.text
