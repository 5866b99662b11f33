"""A store's own ``Limits`` bound every operation's names, not the default limits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from a2pg import AttemptRef, Consumer, Limits, LogSpec, SnapshotWrite, Target
from a2pg.store import Store

from .helpers import HOLDER, TTL, ev
from .invalid_support import prepare, refused

NAME_LIMIT = 8
LONG_NAME = "n" * (NAME_LIMIT + 1)
"""Within the default limit (256), one past this module's limit."""


@pytest.fixture
def limits() -> Limits:
    return Limits(max_name_length=NAME_LIMIT)


NameOp = Callable[[Store], Awaitable[Any]]

NAME_OPS: dict[str, NameOp] = {
    "fail_attempt consumer": lambda s: s.fail_attempt(
        "s", consumer=LONG_NAME, lane=None, index=1, attempt=1, error="e", max_failures=3
    ),
    "fail_attempt lane": lambda s: s.fail_attempt(
        "s", consumer="c", lane=LONG_NAME, index=1, attempt=1, error="e", max_failures=3
    ),
    "append target": lambda s: s.append("s", [ev(to=[Target(LONG_NAME)])]),
    "claim holder": lambda s: s.claim_available("s", holder=LONG_NAME, ttl=TTL),
    "renew claim": lambda s: s.renew_claims(
        "s", holder=HOLDER, claims=[AttemptRef(LONG_NAME, None, 1, 1)], ttl=TTL
    ),
    "complete consumer": lambda s: s.complete_attempt(
        "s", consumer=LONG_NAME, lane=None, index=1, attempt=1
    ),
    "redrive consumer": lambda s: s.redrive("s", consumer=LONG_NAME, index=1, action="skip"),
    "redrive lane": lambda s: s.redrive("s", consumer="c", index=1, action="skip", lane=LONG_NAME),
    "snapshot reducer": lambda s: s.put_snapshots("s", LONG_NAME, [SnapshotWrite(1, {})]),
    "register consumer": lambda s: s.register_consumers([Consumer(LONG_NAME, LogSpec())]),
    "presence namespace": lambda s: s.presence.read(LONG_NAME),
}


@pytest.mark.parametrize("op", NAME_OPS.values(), ids=NAME_OPS.keys())
async def test_names_past_the_stores_own_limit_are_refused(store: Store, op: NameOp) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: op(store), "max_name_length=8")


async def test_names_within_the_stores_own_limit_are_taken(store: Store) -> None:
    await prepare(store)
    result = await store.fail_attempt(
        "s", consumer="c", lane=None, index=1, attempt=1, error="e", max_failures=3
    )
    assert result.outcome == "failed"
