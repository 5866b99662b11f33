"""a2pg's Alembic migrations: fresh, repeated, concurrent, reversed, per schema, hosted, shipped."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import event

from a2pg.errors import A2Error
from a2pg.models import NewEvent
from a2pg.postgres import PostgresStore, citus, migrate
from a2pg.postgres.layout import (
    HEAD_REVISION,
    LAYOUT,
    REVISIONS,
    TABLES,
    VERSION_TABLE,
    inspect_layout,
)
from a2pg.testing import scratch_database

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 60


@pytest.fixture
def db(postgres_server_dsn: str) -> Iterator[str]:
    with scratch_database(postgres_server_dsn, "a2pg_mig") as dsn:
        yield dsn


def tables(dsn: str, schema: str = "public") -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("select tablename from pg_tables where schemaname = %s", [schema])
        return {name for (name,) in rows}


def versions(dsn: str, table: str = VERSION_TABLE, schema: str = "public") -> list[str]:
    query = psycopg.sql.SQL("select version_num from {}.{} order by 1").format(
        psycopg.sql.Identifier(schema), psycopg.sql.Identifier(table)
    )
    with psycopg.connect(dsn) as conn:
        return [version for (version,) in conn.execute(query)]


def test_upgrade_creates_the_head_layout_on_an_empty_database(db: str) -> None:
    migrate.upgrade(db)
    assert tables(db) == {*TABLES, VERSION_TABLE}
    assert versions(db) == [HEAD_REVISION]
    with psycopg.connect(db) as conn:
        meta: dict[str, str] = dict(conn.execute("select key, value from a2_meta"))
    assert meta == {"layout": LAYOUT, "revision": HEAD_REVISION}


def test_upgrade_again_changes_nothing(db: str) -> None:
    migrate.upgrade(db)
    migrate.upgrade(db)
    migrate.upgrade(db, revision="head")
    assert versions(db) == [HEAD_REVISION]
    assert inspect_layout(db).is_current


def test_two_concurrent_upgrades_in_separate_processes_both_succeed(db: str) -> None:
    script = "import sys; from a2pg.postgres.migrate import upgrade; upgrade(sys.argv[1])"
    key = migrate.LOCK_KEY_PREFIX + "public"
    with psycopg.connect(db, autocommit=True) as holder:
        # Hold the migration lock so both processes are provably inside upgrade at once.
        holder.execute("select pg_advisory_lock(hashtextextended(%s, 0))", [key])
        procs = [
            subprocess.Popen([sys.executable, "-c", script, db], stderr=subprocess.PIPE)
            for _ in range(2)
        ]
        deadline = time.monotonic() + WAIT_SECONDS
        waiting = 0
        while waiting < 2 and time.monotonic() < deadline:
            row = holder.execute(
                "select count(*) from pg_locks where locktype = 'advisory' and not granted"
            ).fetchone()
            waiting = row[0] if row else 0
            time.sleep(0.05)
        holder.execute("select pg_advisory_unlock(hashtextextended(%s, 0))", [key])
    results = [
        (proc.wait(WAIT_SECONDS), proc.stderr.read() if proc.stderr else b"") for proc in procs
    ]
    assert waiting == 2, "both upgrades should have queued on the advisory lock"
    assert [code for code, _ in results] == [0, 0], results
    assert versions(db) == [HEAD_REVISION]
    assert inspect_layout(db).is_current


def test_upgrade_downgrade_to_base_and_upgrade_again(db: str) -> None:
    migrate.upgrade(db)
    migrate.downgrade(db, revision="0001")
    assert inspect_layout(db).state == "older"
    assert "a2_consumers" not in tables(db)
    migrate.downgrade(db)
    assert tables(db) == {VERSION_TABLE}
    assert versions(db) == []
    assert inspect_layout(db).state == "empty"
    migrate.upgrade(db)
    assert inspect_layout(db).is_current
    assert tables(db) == {*TABLES, VERSION_TABLE}


def event_rows(dsn: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        return list(conn.execute("select idx, event_id from a2_events order by idx"))


async def test_0003_keeps_the_old_event_of_a_reused_id_and_its_downgrade_drops_it(
    db: str,
) -> None:
    """0003 (SPEC 2.6): a session cleared under 0002 can reuse an id of its past, whose old
    event then stays until reclaim; back at 0002, which keeps one event per id, it goes."""
    migrate.upgrade(db, revision="0002")
    with psycopg.connect(db) as conn:
        conn.execute(
            "insert into a2_sessions (session_id, head, clear_index, created_at)"
            " values ('s', 3, 3, now())"
        )
        conn.execute(
            "insert into a2_events (session_id, idx, event_id, event_type, payload, created_at)"
            " values ('s', 1, 'a', 't', 'null', now()), ('s', 2, 'b', 't', 'null', now()),"
            " ('s', 3, 'm', 'a2.cleared', 'null', now())"
        )
    migrate.upgrade(db)
    store = await PostgresStore.open(db, max_size=1)
    try:
        [again] = (await store.append("s", [NewEvent("t", None, id="a")])).events
        [replayed] = (await store.append("s", [NewEvent("t", None, id="a")])).events
        assert again.index == replayed.index == 4
        assert [e.index for e in await store.read("s")] == [3, 4]
    finally:
        await store.close()
    assert event_rows(db) == [(1, "a"), (2, "b"), (3, "m"), (4, "a")]
    migrate.downgrade(db, revision="0002")
    assert inspect_layout(db).revision == "0002"
    assert event_rows(db) == [(2, "b"), (3, "m"), (4, "a")]
    with psycopg.connect(db) as conn, pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(
            "insert into a2_events (session_id, idx, event_id, event_type, payload, created_at)"
            " values ('s', 5, 'b', 't', 'null', now())"
        )
    migrate.upgrade(db)
    assert inspect_layout(db).is_current


def test_each_revision_records_itself_in_a2_meta(db: str) -> None:
    for revision in REVISIONS:
        migrate.upgrade(db, revision=revision)
        assert inspect_layout(db).revision == revision
        assert versions(db) == [revision]


def test_revision_constants_match_the_shipped_scripts() -> None:
    scripts = ScriptDirectory(str(migrate.script_location()))
    assert scripts.get_heads() == [HEAD_REVISION]
    walked = [script.revision for script in scripts.walk_revisions("base", "heads")]
    assert tuple(reversed(walked)) == REVISIONS
    assert scripts.get_revision(REVISIONS[0]).branch_labels == {migrate.BRANCH}


def test_custom_schema_holds_everything_and_leaves_public_alone(db: str) -> None:
    schema = 'a2 "tenant"'
    migrate.upgrade(db, schema=schema)
    assert tables(db, schema) == {*TABLES, VERSION_TABLE}
    assert tables(db) == set()
    assert versions(db, schema=schema) == [HEAD_REVISION]
    migrate.upgrade(db, schema="other", revision="0001")
    assert inspect_layout(db, "other").state == "older"
    assert inspect_layout(db, schema).is_current
    migrate.downgrade(db, schema=schema)
    assert tables(db, schema) == {VERSION_TABLE}
    assert inspect_layout(db, "other").revision == "0001"


def test_any_libpq_dsn_form_is_accepted(db: str) -> None:
    with psycopg.connect(db) as conn:
        params = conn.info.get_parameters()
    keyword_dsn = psycopg.conninfo.make_conninfo(**params)
    migrate.upgrade(keyword_dsn, schema="kw")
    migrate.upgrade(db.replace("postgresql://", "postgresql+psycopg://", 1), schema="url")
    assert inspect_layout(db, "kw").is_current and inspect_layout(db, "url").is_current


def alembic_cli(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_plain_alembic_cli_reads_dsn_and_schema_from_x_args_and_environment(db: str) -> None:
    alembic_cli("-x", f"dsn={db}", "-x", "schema=by_x", "upgrade", "head")
    alembic_cli("upgrade", "heads", env={"A2PG_DSN": db, "A2PG_SCHEMA": "by_env"})
    assert inspect_layout(db, "by_x").is_current and inspect_layout(db, "by_env").is_current
    script = alembic_cli("-x", "schema=offline", "upgrade", "head", "--sql")
    lock = (
        "pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('a2pg.migrate:offline', 0))"
    )
    assert lock in script
    assert 'set local search_path to "offline"' in script
    assert "offline.a2_alembic_version" in script


HOST_REVISION = '''
"""The host application's own table."""
from alembic import op

revision = "h001"
down_revision = None
branch_labels = ("app",)
depends_on = None


def upgrade() -> None:
    op.execute("create table app_things (id int primary key)")


def downgrade() -> None:
    op.execute("drop table app_things")
'''

HOST_ENV = """
from alembic import context
from a2pg.postgres.migrate import create_engine, upgrade_connection

engine = create_engine(context.config.get_main_option("sqlalchemy.url"))
with engine.connect() as connection:
    context.configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()
    if {call_a2pg}:
        upgrade_connection(connection, schema="a2")
        assert context.get_context().connection is connection  # the host's context survives
engine.dispose()
"""


def host_environment(tmp_path: Path, dsn: str, *, with_a2pg_versions: bool) -> Config:
    """A throwaway application environment: its env.py, one revision, its version table."""
    (tmp_path / "versions").mkdir()
    (tmp_path / "versions" / "h001_app.py").write_text(HOST_REVISION)
    (tmp_path / "env.py").write_text(HOST_ENV.format(call_a2pg=not with_a2pg_versions))
    locations = [str(tmp_path / "versions")]
    if with_a2pg_versions:
        locations.append(str(migrate.versions_dir()))
    (tmp_path / "alembic.ini").write_text(
        textwrap.dedent(f"""
        [alembic]
        script_location = {tmp_path}
        path_separator = os
        version_locations = {os.pathsep.join(locations)}
        sqlalchemy.url = {dsn}
        """)
    )
    return Config(str(tmp_path / "alembic.ini"))


def test_host_environment_runs_a2pg_through_upgrade_connection(db: str, tmp_path: Path) -> None:
    command.upgrade(host_environment(tmp_path, db, with_a2pg_versions=False), "heads")
    assert versions(db, "alembic_version") == ["h001"]
    assert versions(db, schema="a2") == [HEAD_REVISION]
    assert tables(db) == {"alembic_version", "app_things"}
    assert inspect_layout(db, "a2").is_current
    migrate.upgrade(db, schema="a2")  # a2pg migrate agrees: nothing to do
    assert versions(db, schema="a2") == [HEAD_REVISION]


def test_host_environment_with_a2pg_versions_in_its_version_locations(
    db: str, tmp_path: Path
) -> None:
    config = host_environment(tmp_path, db, with_a2pg_versions=True)
    command.upgrade(config, f"{migrate.BRANCH}@0001")
    assert versions(db, "alembic_version") == ["0001"]
    command.upgrade(config, "heads")
    # Both branches are recorded in the host's version table, a2pg's tables in its schema.
    assert versions(db, "alembic_version") == [HEAD_REVISION, "h001"]
    assert tables(db) == {"alembic_version", "app_things", *TABLES}
    assert inspect_layout(db).is_current
    # Switching to `a2pg migrate` later adopts the schema instead of failing on its tables.
    migrate.upgrade(db)
    assert versions(db) == [HEAD_REVISION]


def test_a2pg_migrate_adopts_an_older_host_migrated_schema(db: str, tmp_path: Path) -> None:
    command.upgrade(host_environment(tmp_path, db, with_a2pg_versions=True), "a2pg@0001")
    migrate.upgrade(db)
    assert versions(db) == [HEAD_REVISION]
    assert inspect_layout(db).is_current


def archive_text(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(name).decode()


@pytest.mark.slow
def test_the_wheel_ships_the_scripts_and_migrates_without_a_checkout(
    db: str, tmp_path: Path
) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("a2pg-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    shipped = {
        "a2pg/_alembic/env.py",
        "a2pg/_alembic/script.py.mako",
        *(f"a2pg/_alembic/versions/{p.name}" for p in (ROOT / "alembic" / "versions").glob("*.py")),
        # The dashboard's templates and assets (it loads no file from anywhere else).
        *(
            p.relative_to(ROOT).as_posix()
            for folder in ("templates", "static")
            for p in (ROOT / "a2pg" / "dashboard" / folder).iterdir()
        ),
    }
    assert "a2pg/dashboard/static/dashboard.js" in shipped
    shipped |= {"a2pg/py.typed"}  # the package is typed (PEP 561), so mypy reads its hints
    shipped |= {f"a2pg/postgres/sql/{p.name}" for p in (ROOT / "a2pg/postgres/sql").glob("*.sql")}
    assert shipped <= names
    [info] = [name for name in names if name.endswith(".dist-info/METADATA")]
    meta = archive_text(wheel, info)
    assert "Classifier: Typing :: Typed" in meta
    assert "Project-URL: Changelog, " in meta
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    site = tmp_path / "site"
    check = (
        "import sys; from a2pg.postgres import migrate;"
        "assert migrate.script_location().is_relative_to(sys.argv[2]), migrate.script_location();"
        "migrate.upgrade(sys.argv[1], schema='from_wheel')"
    )
    subprocess.run(
        [sys.executable, "-c", check, db, str(site)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        check=True,
    )
    assert inspect_layout(db, "from_wheel").is_current


def statement_count(text: str) -> int:
    """How many SQL statements ``text`` holds: its semicolons outside comments, quoted
    strings, quoted names and dollar-quoted bodies, counting a last one left unended."""
    count, pending, at = 0, False, 0
    while at < len(text):
        if text.startswith("--", at):
            end = text.find("\n", at)
            at = len(text) if end < 0 else end
            continue
        if text.startswith("/*", at):
            at = text.index("*/", at) + 2
            continue
        quote = text[at]
        if quote in "'\"":
            end = at + 1
            while True:
                end = text.index(quote, end) + 1
                if not text.startswith(quote, end):
                    break
                end += 1
            at, pending = end, True
            continue
        tag = re.match(r"\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$", text[at:])
        if tag:
            at, pending = text.index(tag[0], at + len(tag[0])) + len(tag[0]), True
            continue
        if quote == ";":
            count, pending = count + pending, False
        elif not quote.isspace():
            pending = True
        at += 1
    return count + pending


def test_statement_count_sees_through_comments_and_quotes() -> None:
    assert statement_count("select 1") == 1
    assert statement_count("create table t (a int);\nupdate t set a = 1;") == 2
    assert statement_count("-- a; b\nselect ';', \"a;b\" from t /* ; */;") == 1
    assert statement_count("do $a2pg$ begin perform 1; end $a2pg$") == 1
    assert statement_count("do 'begin perform ''x;''; end'") == 1


def test_every_revision_runs_one_statement_per_execute(db: str) -> None:
    """Citus refuses several commands in one statement on distributed tables: each
    ``op.execute`` of every revision, up and down, sends exactly one."""
    sent: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        sent.append(statement)

    engine = migrate.create_engine(db)
    event.listen(engine, "before_cursor_execute", record)
    try:
        with engine.connect() as connection:
            migrate.upgrade_connection(connection)
            connection.commit()
            command.downgrade(migrate.alembic_config(connection=connection), "base")
            connection.commit()
    finally:
        engine.dispose()
    assert any("create table a2_events" in text for text in sent)
    assert any("pg_dist_partition" in text for text in sent)  # 0007's statements, down too
    assert any("undistribute_table" in text for text in sent)
    several = [text for text in sent if statement_count(text) != 1]
    assert not several, several[0]


def catalog(dsn: str) -> list[tuple[str, ...]]:
    """The public schema's tables, columns and indexes, as pg_dump would tell them apart."""
    with psycopg.connect(dsn) as conn:
        columns = conn.execute(
            "select table_name::text, column_name::text, data_type::text,"
            " coalesce(column_default, ''), is_nullable::text"
            " from information_schema.columns where table_schema = 'public'"
        ).fetchall()
        indexes = conn.execute(
            "select tablename::text, indexdef from pg_indexes where schemaname = 'public'"
        ).fetchall()
    return sorted([*columns, *indexes])


def test_0007_changes_nothing_but_the_revision_on_plain_postgresql(db: str) -> None:
    migrate.upgrade(db, revision="0006")
    before = catalog(db)
    migrate.upgrade(db, revision="0007")
    assert catalog(db) == before
    assert inspect_layout(db).revision == "0007"
    migrate.downgrade(db, revision="0006")
    assert catalog(db) == before


def test_citus_kinds_follow_each_table_s_key(db: str) -> None:
    """Distributed by session_id exactly the tables whose primary key leads with it;
    every other table of the layout, a2pg's version table too, a reference table."""
    migrate.upgrade(db)
    with psycopg.connect(db) as conn:
        leading: dict[str, str] = dict(
            conn.execute(
                "select c.relname::text, a.attname::text"
                " from pg_constraint k"
                " join pg_class c on c.oid = k.conrelid"
                " join pg_namespace n on n.oid = c.relnamespace"
                " join pg_attribute a on a.attrelid = c.oid and a.attnum = k.conkey[1]"
                " where k.contype = 'p' and n.nspname = 'public'"
            ).fetchall()
        )
    assert set(citus.KINDS) == {*TABLES, VERSION_TABLE} == set(leading)
    for table, column in leading.items():
        assert citus.KINDS[table] == ("distributed" if column == "session_id" else "reference")


def test_the_script_distributes_only_where_citus_is() -> None:
    """``a2pg migrate --sql``: the Citus statements are guarded, so the one script runs
    on plain PostgreSQL too, with the shard count it was given."""
    script = io.StringIO()
    migrate.write_script(script, "dba", citus_shards=7)
    text = script.getvalue()
    assert "shard_count => 7" in text
    assert text.count("create_distributed_table(rel") == 8
    assert text.count("create_reference_table(rel)") == 7
    with pytest.raises(A2Error) as refused:
        migrate.write_script(io.StringIO(), "dba", citus_shards=0)
    assert refused.value.code == "INVALID_ARGUMENT"
