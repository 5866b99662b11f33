"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

from alembic import op
${imports if imports else ""}
revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}

# Write plain SQL with unqualified a2_ names: env.py sets the search_path to the target
# schema. One statement per op.execute (Citus refuses several on distributed tables). A
# new table goes through a2pg.postgres.citus.distribute(op, table, kind) right after its
# CREATE TABLE, and into citus.KINDS. Update a2_meta's revision row, and REVISIONS in
# a2pg/postgres/layout.py.


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
