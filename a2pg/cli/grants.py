"""``a2pg grants ROLE``: the runtime role's grants on a schema, printed or applied."""

from __future__ import annotations

import argparse
import asyncio
from typing import TextIO

from ..postgres import grants
from ..postgres.layout import DEFAULT_SCHEMA
from . import output as out
from .common import EXIT_NOT_MIGRATED, EXIT_OK, EXIT_USAGE, AddCommand, Command, fail, site

DETAILS = """\
What a runtime role (appenders, workers, streams, the inspection commands) needs on a
migrated schema, and nothing more: USAGE on the schema; SELECT, INSERT, UPDATE and
DELETE on every a2_ table but a2_meta; only SELECT on a2_meta; nothing on
a2_alembic_version, no CREATE, no TEMPORARY. Prints the SQL (for a DBA or psql; needs
no database); --apply runs it instead, in one transaction, as the --dsn user (the
schema's owner, such as the role that ran `a2pg migrate`), after checking the schema is
migrated. Idempotent: run it after every `a2pg migrate`, so a table a new a2pg adds is
granted too. PostgreSQL only."""


def add_parsers(command: AddCommand) -> None:
    parser = command("grants", "print (or --apply) the runtime role's grants on a schema", DETAILS)
    parser.add_argument("role", metavar="ROLE", help="the runtime role to grant to")
    parser.add_argument(
        "--apply",
        dest="print_only",
        action="store_false",
        help="run the grants on the --dsn database instead of printing them",
    )


async def cmd_grants(args: argparse.Namespace, stdout: TextIO) -> int:
    """Prints the grants, connecting nowhere; with ``--apply``, runs them (exit 4 when
    the schema is not migrated: there are no tables to grant on yet)."""
    database = site(args)
    if database.backend != "postgres":
        fail(EXIT_USAGE, "grants are PostgreSQL's: a SQLite file has no roles")
    schema = args.schema or DEFAULT_SCHEMA
    statements = [s.as_string(None) for s in grants.statements(args.role, schema)]
    if not args.print_only:
        await database.reachable()
        status = await database.layout()
        if not status.is_current:
            fail(EXIT_NOT_MIGRATED, f"{status.describe()}; {status.fix()}, then grant")
        await asyncio.to_thread(grants.apply, args.dsn, args.role, schema)
    if args.json:
        out.write_json(
            stdout,
            {
                "role": args.role,
                "schema": schema,
                "statements": statements,
                "applied": not args.print_only,
            },
        )
    elif args.print_only:
        stdout.write(grants.script(args.role, schema))
    else:
        stdout.write(
            f"granted {args.role!r} the runtime rights on schema {schema!r} "
            f"({len(statements)} statements)\n"
        )
    return EXIT_OK


COMMANDS: dict[str, Command] = {"grants": cmd_grants}
