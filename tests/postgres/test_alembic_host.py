"""An application with an Alembic environment of its own, following the recipe of
docs/operating/migrations.md.

Each test writes a small host project (alembic.ini, an env.py that calls
``a2pg.postgres.alembic_host`` as documented, two revisions, the SQLAlchemy metadata of
its tables) and runs the real ``alembic`` command line on a fresh database: upgrade
brings a2pg's branch along, ``check`` and ``--autogenerate`` never propose to drop
a2pg's tables, every other command leaves a2pg's version alone, ``--sql`` prints a
script that builds both, and the host's own lock lets two deploy jobs upgrade at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import sqlalchemy
from alembic import command
from alembic.config import Config
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from a2pg.postgres import migrate
from a2pg.postgres.layout import HEAD_REVISION, REVISIONS, TABLES, VERSION_TABLE, inspect_layout
from a2pg.testing import scratch_database
from tests.cli.conftest import run_script

pytestmark = pytest.mark.postgres

TIMEOUT = 60
HOST_LOCK = "host-app: migrations"

HOST_ENV = '''
"""The host application's env.py: the documented recipe."""
import sqlalchemy
from alembic import context
from sqlalchemy.pool import NullPool

from a2pg.postgres import alembic_host

config = context.config
A2PG_SCHEMA = config.get_main_option("a2pg_schema")
metadata = sqlalchemy.MetaData()
sqlalchemy.Table(
    "app_things", metadata,
    sqlalchemy.Column("id", sqlalchemy.Integer, primary_key=True),
    sqlalchemy.Column("name", sqlalchemy.Text, nullable=False),
)
sqlalchemy.Table(
    "app_notes", metadata,
    sqlalchemy.Column("id", sqlalchemy.Integer, primary_key=True),
    sqlalchemy.Column("body", sqlalchemy.Text, nullable=False),
)
FILTERS = {FILTERS}
HOST_LOCK = "select pg_advisory_xact_lock(hashtext({lock!r}))"


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        literal_binds=True,
        **FILTERS,
    )
    with context.begin_transaction():
        context.run_migrations()
    alembic_host.run_on_upgrade(None, schema=A2PG_SCHEMA)


def run_migrations_online() -> None:
    engine = sqlalchemy.create_engine(config.get_main_option("sqlalchemy.url"), poolclass=NullPool)
    with engine.connect() as connection, connection.begin():
        connection.execute(sqlalchemy.text(HOST_LOCK))
        context.configure(
            connection=connection,
            target_metadata=metadata,
            include_schemas=A2PG_SCHEMA != "public",
            **FILTERS,
        )
        with context.begin_transaction():
            context.run_migrations()
        alembic_host.run_on_upgrade(connection, schema=A2PG_SCHEMA)
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
'''
WITH_FILTERS = (
    "dict(include_name=alembic_host.include_name, include_object=alembic_host.include_object)"
)
WITHOUT_FILTERS = "{}"

REVISION = '''
"""{doc}"""
import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = {down!r}
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "{table}",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("{column}", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("{table}")
'''

SCRIPT_TEMPLATE = '''"""${message}"""
revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None

from alembic import op
import sqlalchemy as sa


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
'''


@dataclass(frozen=True)
class Host:
    """A host project on disk and the database it migrates."""

    root: Path
    dsn: str
    schema: str

    @property
    def ini(self) -> Path:
        return self.root / "alembic.ini"

    def alembic(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        """The real ``alembic`` command line, run in the project's folder."""
        done = subprocess.run(
            [sys.executable, "-m", "alembic", "-c", str(self.ini), *args],
            cwd=self.root,
            env={k: v for k, v in os.environ.items() if not k.startswith("A2PG_")},
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        if ok:
            assert done.returncode == 0, done.stdout + done.stderr
        return done

    def host_versions(self) -> list[str]:
        return versions(self.dsn, "public", "alembic_version")

    def a2pg_versions(self) -> list[str]:
        return versions(self.dsn, self.schema, VERSION_TABLE)


def versions(dsn: str, schema: str, table: str) -> list[str]:
    query = sql.SQL("select version_num from {}.{} order by 1").format(
        sql.Identifier(schema), sql.Identifier(table)
    )
    with psycopg.connect(dsn) as conn:
        return [version for (version,) in conn.execute(query)]


def tables(dsn: str, schema: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("select tablename from pg_tables where schemaname = %s", [schema])
        return {name for (name,) in rows}


def sqlalchemy_url(dsn: str) -> str:
    """The DSN as the ``postgresql+psycopg://`` URL a host's alembic.ini holds."""
    params = conninfo_to_dict(dsn)
    url = sqlalchemy.URL.create(
        "postgresql+psycopg",
        username=str(params.get("user") or "postgres"),
        password=str(params["password"]) if params.get("password") else None,
        host=str(params.get("host") or "127.0.0.1"),
        port=int(params.get("port") or 5432),
        database=str(params["dbname"]),
    )
    return url.render_as_string(hide_password=False)


def write_host(root: Path, dsn: str, schema: str, *, filters: str = WITH_FILTERS) -> Host:
    versions_dir = root / "migrations" / "versions"
    versions_dir.mkdir(parents=True)
    (root / "migrations" / "env.py").write_text(HOST_ENV.format(FILTERS=filters, lock=HOST_LOCK))
    (root / "migrations" / "script.py.mako").write_text(SCRIPT_TEMPLATE)
    for revision, down, table, column in (
        ("h001", None, "app_things", "name"),
        ("h002", "h001", "app_notes", "body"),
    ):
        (versions_dir / f"{revision}.py").write_text(
            REVISION.format(
                doc=f"The host's {table}.", revision=revision, down=down, table=table,
                column=column,
            )
        )  # fmt: skip
    (root / "alembic.ini").write_text(
        textwrap.dedent(f"""\
        [alembic]
        script_location = %(here)s/migrations
        path_separator = os
        sqlalchemy.url = {sqlalchemy_url(dsn).replace("%", "%%")}
        a2pg_schema = {schema}
        """)
    )
    return Host(root, dsn, schema)


@pytest.fixture
def database(postgres_server_dsn: str) -> Iterator[str]:
    with scratch_database(postgres_server_dsn, "a2pg_host") as dsn:
        yield dsn


@pytest.fixture
def host(tmp_path: Path, database: str) -> Host:
    """a2pg in schema public, beside the host's own tables: what autogenerate sees first."""
    return write_host(tmp_path, database, "public")


def test_upgrade_brings_a2pg_along_and_autogenerate_sees_nothing_to_do(host: Host) -> None:
    host.alembic("upgrade", "head")
    assert host.host_versions() == ["h002"]
    assert host.a2pg_versions() == [HEAD_REVISION]
    assert tables(host.dsn, "public") == {
        "alembic_version", "app_things", "app_notes", VERSION_TABLE, *TABLES
    }  # fmt: skip
    check = run_script("check", "--dsn", host.dsn, "--schema", host.schema)
    assert check.code == 0, check

    checked = host.alembic("check")
    assert "No new upgrade operations detected" in checked.stdout + checked.stderr
    host.alembic("revision", "--autogenerate", "-m", "nothing")
    [generated] = [
        path for path in (host.root / "migrations" / "versions").glob("*.py")
        if path.stem not in ("h001", "h002")
    ]  # fmt: skip
    body = generated.read_text()
    assert "op." not in body
    assert body.count("    pass\n") == 2


def test_without_the_filters_autogenerate_would_drop_a2pg_tables(
    tmp_path: Path, database: str
) -> None:
    """The control: the same host without the filters sees a2pg's tables as removed."""
    host = write_host(tmp_path, database, "public", filters=WITHOUT_FILTERS)
    host.alembic("upgrade", "head")
    checked = host.alembic("check", ok=False)
    assert checked.returncode != 0
    output = checked.stdout + checked.stderr
    assert "remove_table" in output and "a2_events" in output


def test_a2pg_in_its_own_schema_is_filtered_with_include_schemas(
    tmp_path: Path, database: str
) -> None:
    host = write_host(tmp_path, database, "a2")
    host.alembic("upgrade", "head")
    assert tables(database, "a2") == {VERSION_TABLE, *TABLES}
    assert tables(database, "public") == {"alembic_version", "app_things", "app_notes"}
    assert inspect_layout(database, "a2").is_current
    host.alembic("check")


def a2pg_tables(dsn: str) -> set[str]:
    return {name for name in tables(dsn, "public") if name.startswith("a2_")}


def test_other_host_commands_leave_a2pg_branch_alone(host: Host) -> None:
    host.alembic("upgrade", "head")
    older = REVISIONS[-2]
    migrate.downgrade(host.dsn, host.schema, older)  # any run of a2pg's branch would move it
    older_tables = a2pg_tables(host.dsn)
    for args in (
        ("current",),
        ("check",),
        ("stamp", "h001"),
        ("stamp", "h002"),
        ("history", "--indicate-current"),
        ("downgrade", "-1"),
    ):
        host.alembic(*args)
        assert host.a2pg_versions() == [older], args
    assert host.host_versions() == ["h001"]
    assert "app_notes" not in tables(host.dsn, "public")
    host.alembic("downgrade", "base")
    assert host.host_versions() == []
    assert host.a2pg_versions() == [older]
    assert a2pg_tables(host.dsn) == older_tables  # as the downgrade left them

    host.alembic("upgrade", "head")
    assert host.a2pg_versions() == [HEAD_REVISION]
    assert host.host_versions() == ["h002"]


def test_programmatic_commands_are_told_apart_too(host: Host) -> None:
    """``alembic.command`` called from code (no command line, no ``cmd_opts``)."""
    config = Config(str(host.ini))
    command.upgrade(config, "h001")
    assert host.a2pg_versions() == [HEAD_REVISION]
    migrate.downgrade(host.dsn, host.schema, REVISIONS[0])
    command.stamp(config, "h001")
    command.downgrade(config, "base")
    assert host.a2pg_versions() == [REVISIONS[0]]
    command.upgrade(config, "heads")
    assert host.a2pg_versions() == [HEAD_REVISION]


def test_offline_upgrade_prints_a_script_that_builds_both(host: Host) -> None:
    script = host.alembic("upgrade", "head", "--sql").stdout
    assert "CREATE TABLE app_things" in script
    assert "create table a2_events" in script
    assert "pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('a2pg.migrate:" in script
    assert tables(host.dsn, "public") == set()  # offline: nothing ran
    with psycopg.connect(host.dsn, autocommit=True) as conn:
        conn.execute(script)  # as a DBA would, with psql -f
    assert host.host_versions() == ["h002"]
    assert host.a2pg_versions() == [HEAD_REVISION]
    assert inspect_layout(host.dsn).is_current
    host.alembic("check")


def test_two_host_deploys_at_once_both_succeed_under_the_host_lock(host: Host) -> None:
    """The host's env.py takes its own lock (a2pg's covers a2pg's branch only): two jobs
    held at that lock until both wait on it, then released, both exit 0."""
    with psycopg.connect(host.dsn, autocommit=True) as holder:
        holder.execute("select pg_advisory_lock(hashtext(%s))", [HOST_LOCK])
        jobs = [
            subprocess.Popen(
                [sys.executable, "-m", "alembic", "-c", str(host.ini), "upgrade", "head"],
                cwd=host.root,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        try:
            deadline = time.monotonic() + TIMEOUT
            waiting = 0
            while waiting < 2:
                assert time.monotonic() < deadline, "the deploy jobs never queued on the lock"
                assert all(job.poll() is None for job in jobs), [j.communicate() for j in jobs]
                row = holder.execute(
                    "select count(*) from pg_locks where locktype = 'advisory' and not granted"
                ).fetchone()
                waiting = row[0] if row else 0
                time.sleep(0.05)
        finally:
            holder.execute("select pg_advisory_unlock(hashtext(%s))", [HOST_LOCK])
        results = [(job.wait(TIMEOUT), job.communicate()[1]) for job in jobs]
    assert [code for code, _ in results] == [0, 0], results
    assert host.host_versions() == ["h002"]
    assert host.a2pg_versions() == [HEAD_REVISION]


def test_a2pg_branch_in_the_host_transaction_gives_its_search_path_back(database: str) -> None:
    engine = migrate.create_engine(database)
    try:
        with engine.connect() as connection, connection.begin():
            connection.execute(sqlalchemy.text("set local search_path to app, public"))
            migrate.upgrade_connection(connection, schema="a2")
            path = connection.scalar(sqlalchemy.text("show search_path"))
            assert connection.in_transaction()
    finally:
        engine.dispose()
    assert path == "app, public"
    assert inspect_layout(database, "a2").is_current
