"""Shared setup for the bad-input modules: a session with live work, and the refusal check."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from a2pg import A2Error, Target
from a2pg.store import Store

from .helpers import append, assert_code, claim, ev, fingerprint

Call = Callable[[], Awaitable[Any]]

LONG = 257
"""One past every default length limit (Limits: 256)."""


async def prepare(store: Store) -> tuple[object, ...]:
    """Session "s": event 1 targets c (claimed), event 2 queues on d's lane x; its fingerprint."""
    await append(store, "s", ev("a", {"n": 1}, id="e1", to=["c"]), ev("b", to=[Target("d", "x")]))
    await claim(store, "s", through=1)
    return await fingerprint(store, "s")


async def refused(store: Store, before: tuple[object, ...], call: Call, *fragments: str) -> None:
    """``call`` raises INVALID_ARGUMENT (naming ``fragments``) and nothing was written."""
    with pytest.raises(A2Error) as error:
        await call()
    assert_code(error, "INVALID_ARGUMENT", *fragments)
    assert await fingerprint(store, "s") == before
