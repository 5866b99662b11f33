"""For applications with an Alembic environment of their own: run a2pg's branch from it.

a2pg's history is the Alembic branch ``a2pg`` with its own version table
(``<schema>.a2_alembic_version``). An application that migrates its own tables with
Alembic calls two things from its ``env.py``:

- :func:`include_name` and :func:`include_object`, given to ``context.configure``, so
  ``alembic check`` and ``alembic revision --autogenerate`` never see a2pg's tables,
  their indexes or a2pg's version table (in whatever schema) and so never propose to
  drop them;
- :func:`run_on_upgrade`, after the application's own migrations, which brings a2pg's
  branch to its head when, and only when, the command is ``alembic upgrade``: online on
  the application's connection (in its transaction), offline (``--sql``) into the same
  script. ``current``, ``check``, ``revision``, ``stamp``, ``downgrade`` and every
  other command leave a2pg's branch alone.

The recipe (docs/operating/migrations.md has it too)::

    from a2pg.postgres import alembic_host

    HOST_LOCK = "select pg_advisory_xact_lock(hashtext('myapp: migrations'))"

    def run_migrations_online() -> None:
        with engine.connect() as connection, connection.begin():
            # Your deploy jobs may run at once: take your own lock first (a2pg's own
            # lock covers only a2pg's branch).
            connection.execute(sqlalchemy.text(HOST_LOCK))
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                include_name=alembic_host.include_name,
                include_object=alembic_host.include_object,
            )
            with context.begin_transaction():
                context.run_migrations()
            alembic_host.run_on_upgrade(connection, schema="a2")

    def run_migrations_offline() -> None:
        context.configure(url=url, target_metadata=target_metadata, literal_binds=True,
                          include_name=alembic_host.include_name,
                          include_object=alembic_host.include_object)
        with context.begin_transaction():
            context.run_migrations()
        alembic_host.run_on_upgrade(None, schema="a2")

With filters of your own, combine them: ``include_object=lambda *a:
alembic_host.include_object(*a) and mine(*a)``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .layout import DEFAULT_SCHEMA, TABLES, VERSION_TABLE
from .migrate import upgrade_connection, write_script

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

A2PG_TABLES = frozenset((*TABLES, VERSION_TABLE))
"""Every table a2pg's migrations create, its version table included."""

log = logging.getLogger("a2pg.migrate")


def include_name(name: str | None, type_: str, parent_names: Mapping[str, str | None]) -> bool:
    """Alembic's ``include_name`` hook: False for a2pg's tables and everything on them."""
    if type_ == "table":
        return name not in A2PG_TABLES
    return parent_names.get("table_name") not in A2PG_TABLES


def include_object(
    object_: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Alembic's ``include_object`` hook: False for a2pg's tables and their indexes,
    columns and constraints (the objects ``include_name`` let through by name)."""
    if type_ == "table":
        return name not in A2PG_TABLES
    table = getattr(object_, "table", None)
    return getattr(table, "name", None) not in A2PG_TABLES


def alembic_command() -> str | None:
    """The Alembic command running this ``env.py`` (``upgrade``, ``downgrade``, ``stamp``,
    ``current``, ``check``, ``revision``...), or None when it cannot be told.

    Every command in ``alembic.command`` hands the environment a function it defines
    inside itself (``upgrade()`` defines ``upgrade``, ``current()`` defines
    ``display_version``...), which the migration context keeps as ``opts["fn"]``: the
    first part of that function's qualified name is the command, whether the command
    came from the ``alembic`` CLI or from ``alembic.command.upgrade(config, ...)`` in
    code. ``config.cmd_opts`` (set only by the CLI) is the fallback. The environment
    must be configured (``context.configure``) first.
    """
    from alembic import context

    fn = context.get_context().opts.get("fn")
    if fn is not None and getattr(fn, "__module__", None) == "alembic.command":
        return str(fn.__qualname__).split(".", 1)[0]
    cmd = getattr(context.config.cmd_opts, "cmd", None)
    if cmd:
        return str(getattr(cmd[0], "__name__", "")) or None
    return None


def run_on_upgrade(connection: Connection | None, schema: str = DEFAULT_SCHEMA) -> bool:
    """Brings a2pg's branch in ``schema`` to its head if this is ``alembic upgrade``;
    returns whether it did.

    Online, it runs on ``connection``, in its open transaction (which the caller
    commits), under a2pg's advisory lock; the transaction's search_path is left as it
    was. Offline (``alembic upgrade ... --sql``, ``connection`` None), it writes a2pg's
    script, from a2pg's base, into the same output: a2pg's tables come with the DDL a
    DBA is given. The host's ``alembic.context`` stays usable afterwards.
    """
    from alembic import context

    command = alembic_command()
    if command != "upgrade":
        if command is None:
            log.warning(
                "a2pg's migrations did not run: cannot tell which Alembic command runs "
                "this env.py; run `a2pg migrate --schema %s`",
                schema,
            )
        return False
    if context.is_offline_mode():
        write_script(context.get_context().output_buffer, schema)
        return True
    if connection is None:
        raise ValueError("run_on_upgrade needs the migration's connection when online")
    upgrade_connection(connection, schema=schema)
    return True
