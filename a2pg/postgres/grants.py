"""The runtime role's grants: exactly what appenders, workers, streams and the inspection
commands need on a migrated schema, and nothing more (``a2pg grants ROLE``).

- ``USAGE`` on the schema;
- ``SELECT, INSERT, UPDATE, DELETE`` on every ``a2_`` table but ``a2_meta``;
- only ``SELECT`` on ``a2_meta`` (the layout check reads it; only ``a2pg migrate``
  writes it);
- nothing on ``a2_alembic_version``, no sequences (the layout has none), no CREATE or
  TEMPORARY, no TRUNCATE, REFERENCES or TRIGGER, no function, no membership.

The statements are built with ``psycopg.sql`` identifiers (a role or schema name is
quoted, never pasted into the text), so any name PostgreSQL accepts prints and runs
as given. ``tests/postgres/test_least_privilege.py`` runs a whole workload as a role
given exactly this output, in a database where PUBLIC has nothing but CONNECT.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from ..errors import invalid
from .dsn import to_libpq
from .layout import DEFAULT_SCHEMA, TABLES, check_schema

READ_ONLY_TABLES = ("a2_meta",)
"""Read by the layout check; only ``a2pg migrate`` writes them."""

RUNTIME_TABLES = tuple(name for name in TABLES if name not in READ_ONLY_TABLES)
"""Read and written by the runtime role: every other ``a2_`` table."""

CONNECT_TIMEOUT = 10
"""Seconds ``apply`` waits for its connection."""


def check_role(role: object) -> str:
    """A role name PostgreSQL accepts: 1 to 63 bytes, no NUL; not ``public`` (granting
    to PUBLIC would give the runtime rights to every role)."""
    if not isinstance(role, str) or not role or "\x00" in role:
        raise invalid(f"role must be a non-empty name, got {role!r}")
    if len(role.encode()) > 63:
        raise invalid(f"role name {role!r} is longer than 63 bytes")
    if role.lower() == "public":
        raise invalid("role public is every role: name the runtime role itself")
    return role


def statements(role: str, schema: str = DEFAULT_SCHEMA) -> list[sql.Composed]:
    """The runtime role's grants on ``schema``, in order; idempotent (granting again
    changes nothing)."""
    who = sql.Identifier(check_role(role))
    where = sql.Identifier(check_schema(schema))

    def tables(names: tuple[str, ...]) -> sql.Composed:
        """One table a line, indented: the script is read by people."""
        each = (sql.SQL("{}.{}").format(where, sql.Identifier(name)) for name in names)
        return sql.SQL(",\n    ").join(each)

    return [
        sql.SQL("grant usage on schema {} to {}").format(where, who),
        sql.SQL("grant select, insert, update, delete on\n    {}\n    to {}").format(
            tables(RUNTIME_TABLES), who
        ),
        sql.SQL("grant select on {} to {}").format(tables(READ_ONLY_TABLES), who),
    ]


def script(role: str, schema: str = DEFAULT_SCHEMA) -> str:
    """The grants as a SQL script, one statement a line, for a DBA or ``psql``."""
    lines = [
        f"-- a2pg's runtime role {role!r} on schema {schema!r}: run after every `a2pg migrate`"
    ]
    lines += [f"{statement.as_string(None)};" for statement in statements(role, schema)]
    return "\n".join(lines) + "\n"


GRANTOR_HINT = (
    "the --dsn user must own the schema's tables (the role that ran `a2pg migrate`) or "
    "hold the rights WITH GRANT OPTION"
)


def apply(dsn: str, role: str, schema: str = DEFAULT_SCHEMA) -> None:
    """Runs the grants in one transaction on ``dsn``'s database, as its user (the
    schema's owner, or a role holding the rights WITH GRANT OPTION).

    A GRANT its user may not make is only a WARNING in PostgreSQL ("no privileges were
    granted"): any warning rolls the whole back and raises ``InsufficientPrivilege``,
    so nothing reports success having granted less than the list.
    """
    chosen = statements(role, schema)
    warnings: list[str] = []

    def noticed(diagnostic: psycopg.errors.Diagnostic) -> None:
        if diagnostic.severity_nonlocalized == "WARNING":
            warnings.append(diagnostic.message_primary or "a warning")

    connecting = psycopg.connect(to_libpq(dsn), connect_timeout=CONNECT_TIMEOUT)
    with connecting as conn:
        conn.add_notice_handler(noticed)
        with conn.transaction():
            for statement in chosen:
                conn.execute(statement)
            if warnings:
                raise psycopg.errors.InsufficientPrivilege(f"{warnings[0]} ({GRANTOR_HINT})")
