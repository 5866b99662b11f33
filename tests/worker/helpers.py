"""Shared test tools: a recording proxy around a real store, event builders, bounded waits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, cast

from a2pg import CompletedAndClaimed, CompleteResult, Completion, Head, NewEvent, Target
from a2pg.store import Store

TIMEOUT = 30.0
"""Every wait in these tests is bounded: a hung worker fails the test instead of the suite
(generous: on Citus, on a loaded CI machine, a worker suite test took 21 s)."""


def work(n: int, *, to: str = "w", lane: str | None = None, type_: str = "job") -> NewEvent:
    return NewEvent(type_, {"n": n}, targets=[Target(to, lane)])


async def until(predicate: Callable[[], bool], *, within: float = TIMEOUT) -> None:
    """Yields to other tasks (and threads) until ``predicate`` holds, for at most ``within`` s."""

    async def poll() -> None:
        while not predicate():  # noqa: ASYNC110 - predicates also watch handler threads
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), within)


async def bounded(awaitable: Any, *, within: float = TIMEOUT) -> Any:
    return await asyncio.wait_for(awaitable, within)


class RecordingStore:
    """Delegates to a real store and records the worker's batched calls.

    Not a mock: every call reaches the wrapped backend; this only watches.
    """

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.completion_batches: list[int] = []
        self.fused_batches: list[int] = []
        """Completions sent with a claim (``complete_and_claim``), also in the above."""
        self.claim_limits: list[int] = []
        self.renewals: list[tuple[str, int]] = []
        self.releases: list[tuple[str, int]] = []
        self.failed_attempts: list[tuple[str, int]] = []
        self.registered: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete_attempts(self, completions: Sequence[Completion]) -> list[CompleteResult]:
        self.completion_batches.append(len(completions))
        return await self.inner.complete_attempts(completions)

    async def complete_and_claim(
        self, completions: Sequence[Completion], **options: Any
    ) -> CompletedAndClaimed:
        """Recorded as a batch of completions and a claim: what it stands for."""
        if completions:
            self.completion_batches.append(len(completions))
            self.fused_batches.append(len(completions))
        self.claim_limits.append(options.get("limit", 10))
        return await self.inner.complete_and_claim(completions, **options)

    async def claim_any(self, **options: Any) -> list[Head]:
        self.claim_limits.append(options.get("limit", 10))
        return await self.inner.claim_any(**options)

    async def renew_claims(self, session_id: str, **options: Any) -> Any:
        self.renewals.append((session_id, len(options["claims"])))
        return await self.inner.renew_claims(session_id, **options)

    async def release_claims(self, session_id: str, **options: Any) -> Any:
        self.releases.append((session_id, len(options["claims"])))
        return await self.inner.release_claims(session_id, **options)

    async def fail_attempt(self, session_id: str, **options: Any) -> Any:
        self.failed_attempts.append((session_id, options["index"]))
        return await self.inner.fail_attempt(session_id, **options)

    async def register_consumers(self, consumers: Sequence[Any]) -> None:
        self.registered.append([c.name for c in consumers])
        await self.inner.register_consumers(consumers)

    def as_store(self) -> Store:
        return cast(Store, self)
