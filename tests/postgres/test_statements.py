"""Statement texts as the code builds them: claim_any's per-limit texts and their plan
(``test_queries.py`` checks that every statement the code names exists)."""

from __future__ import annotations

import re

import psycopg
import pytest

from a2pg.postgres import PostgresStore, queries
from tests.postgres.support import work

pytestmark = pytest.mark.postgres


def _numbered(text: str) -> tuple[str, list[str]]:
    """``%(name)s`` placeholders as ``$n`` (for PREPARE), and the names in order."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    return re.sub(r"%\((\w+)\)s", number, text), order


async def test_claim_any_scans_the_ready_index_even_with_a_generic_plan(
    store: PostgresStore, postgres_dsn: str
) -> None:
    for s in range(200):
        await store.append(f"s{s:03d}", work(10), consumers=[])
    text, names = _numbered(queries.claim_any(10).decode())
    values = {"now": "null", "holder": "'h'", "ttl": "'30 seconds'", "max_failures": "null"}
    values["names"] = "null"
    args = ", ".join(values[name] for name in names)
    async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
        await conn.execute("analyze")
        await conn.execute("set plan_cache_mode = force_generic_plan")
        await conn.execute(f"prepare claim as {text}".encode())
        await conn.execute("begin")
        cur = await conn.execute(f"explain execute claim({args})".encode())
        plan = "\n".join(row[0] for row in await cur.fetchall())
        await conn.execute("rollback")
    # The pick of ready heads must walk the ready_at index. At this small size (2,000
    # cursors) the planner may join the UPDATE back by a seq scan, a legitimate choice
    # that made this test flaky; test_plans.py checks the whole statement at 10,000.
    picked = plan.split("CTE picked", 1)[1].split("CTE claimed", 1)[0]
    assert "Index Scan using a2_cursors_ready on a2_cursors" in picked, plan
    assert "Seq Scan" not in picked, plan


async def test_claim_any_texts_are_one_per_limit() -> None:
    assert queries.claim_any(10) is queries.claim_any(10)
    assert b"limit 10\n" in queries.claim_any(10)
    assert b"limit 50\n" in queries.claim_any(50)
