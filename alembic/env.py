"""Alembic environment for a2pg: one schema, its own version table, under an advisory lock."""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from a2pg.errors import A2Error
from a2pg.postgres import alembic_host, citus, layout, migrate

config = context.config
x_args = context.get_x_argument(as_dictionary=True)

# Settings, first found wins: programmatic attributes, `-x key=value`, environment, alembic.ini.
# (The Citus shard count too: `-x citus_shards=N`, A2PG_CITUS_SHARDS.)
dsn: str | None = (
    config.attributes.get("dsn")
    or x_args.get("dsn")
    or os.environ.get("A2PG_DSN")
    or config.get_main_option("sqlalchemy.url")
    or None
)
schema: str = layout.check_schema(
    config.attributes.get("schema")
    or x_args.get("schema")
    or os.environ.get("A2PG_SCHEMA")
    or config.get_main_option("a2pg.schema")
    or layout.DEFAULT_SCHEMA
)

if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def run_offline() -> None:
    """``--sql``: prints the script, preamble included, for a DBA to run."""
    context.configure(
        dialect_name="postgresql",
        literal_binds=True,
        version_table=layout.VERSION_TABLE,
        version_table_schema=schema,
    )
    with context.begin_transaction():
        for statement in migrate.preamble(schema):
            context.execute(statement.as_string())
        context.run_migrations()


def run_on(connection: Connection) -> None:
    """Migrates in the connection's open transaction, which the caller commits; its
    statements wait for locks at most ``lock_timeout`` seconds when ``upgrade`` says so."""
    status = migrate.prepare_schema(
        connection, schema, lock_timeout=config.attributes.get("lock_timeout")
    )
    context.configure(
        connection=connection,
        version_table=layout.VERSION_TABLE,
        version_table_schema=schema,
    )
    migration = context.get_context()
    heads = migration.get_current_heads()
    if not heads and status.revision is not None:
        # Migrated from a host environment's version table: adopt what a2_meta records.
        migration.stamp(context.script, status.revision)
    elif heads and status.state == "empty":
        raise A2Error(
            "STORE_NOT_CONFIGURED",
            f"{layout.VERSION_TABLE} in schema {schema!r} says {', '.join(heads)} but the "
            f"a2pg tables are gone; drop {schema}.{layout.VERSION_TABLE} and run `a2pg migrate`",
        )
    # The connection is already in a transaction, so Alembic's begin_transaction()
    # would do nothing: the whole run commits (or rolls back) as one.
    context.run_migrations()
    # On Citus, an upgrade puts right, in the same transaction, a current layout whose
    # tables are not all of their kind (one made local by hand, or the extension created
    # after 0007); other commands (downgrade, current, stamp...) leave them as they are.
    if alembic_host.alembic_command() == "upgrade":
        migrate.distribute_tables(connection, schema, citus.shard_setting(config))


def run_online() -> None:
    given: Connection | None = config.attributes.get("connection")
    if given is not None:
        if given.in_transaction():
            run_on(given)
        else:
            with given.begin():
                run_on(given)
        return
    if dsn is None:
        raise A2Error(
            "STORE_NOT_CONFIGURED",
            "no database to migrate: set A2PG_DSN, or pass -x dsn=postgresql://...",
        )
    engine = migrate.create_engine(dsn)
    try:
        with engine.connect() as connection, connection.begin():
            run_on(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
