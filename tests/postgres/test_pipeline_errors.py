"""A write transaction refused by the server logs nothing of psycopg's beside the error.

When a statement of a pipelined transaction fails, the statements queued behind it are
answered "pipeline aborted"; read when the pipeline ends, psycopg used to log each time
``error ignored terminating <AsyncPipeline>: pipeline aborted`` at WARNING, about an
error the store raises (or handles) anyway. Whether the server's answers were in by then
depends on timing, so each case runs many times.
"""

from __future__ import annotations

import logging

import pytest

from a2pg import A2Error, Claimed, Completion, NewEvent, Superseded, Target
from a2pg.postgres import PostgresStore

pytestmark = pytest.mark.postgres

ROUNDS = 40


def pipeline_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("psycopg") and r.levelno >= logging.WARNING
    ]


async def test_refused_writes_log_no_psycopg_warning(
    store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="psycopg")
    job = NewEvent("job", {}, targets=[Target("c")])
    for n in range(ROUNDS):
        session = f"s{n}"
        await store.append(session, [NewEvent("a", {}, id="taken"), job], consumers=[])
        # A completion that misses its fence (no cursor of that consumer): the fenced
        # statement fails in the pipeline, then the judged transaction says superseded.
        result = await store.complete_attempt(
            session, consumer="other", lane=None, index=2, attempt=1, events=[]
        )
        assert result == Superseded()
        claimed = await store.claim_available(session, holder="h", ttl=30)
        assert isinstance(claimed, Claimed), claimed
        [head] = claimed.heads
        # A completion returning an id the session holds: refused, nothing written.
        taken = Completion(
            session, "c", None, head.index, head.attempt, (NewEvent("r", {}, id="taken"),)
        )
        with pytest.raises(A2Error) as error:
            await store.complete_attempts([taken])
        assert error.value.code == "PARTIAL_DUPLICATE_BATCH"
        with pytest.raises(A2Error) as error:
            await store.complete_and_claim([taken], holder="h", ttl=30)
        assert error.value.code == "PARTIAL_DUPLICATE_BATCH"
        with pytest.raises(A2Error) as error:
            await store.append(session, [NewEvent("a", {}, id="taken"), NewEvent("b", {})])
        assert error.value.code == "PARTIAL_DUPLICATE_BATCH"
    assert pipeline_warnings(caplog) == []
    # The connections went back clean: the store goes on working.
    assert (await store.complete_attempts([Completion("s0", "c", None, 2, 1)]))[0] is not None
