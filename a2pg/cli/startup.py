"""``a2pg worker --wait``: open the store once the database answers, retrying with backoff."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ..backends import Site, classify
from ..worker.health import heartbeat
from .common import EXIT_UNREACHABLE, CliError, first_line
from .secrets import Hide

if TYPE_CHECKING:
    from ..front import CheckedStore

log = logging.getLogger("a2pg.worker")

DEFAULT_WAIT = 300.0
"""Seconds ``a2pg worker`` waits for its database at start (``--wait``): long enough for a
database and a worker deployed together, or a failover, to come up."""

FIRST_RETRY = 0.25
"""Seconds before the first retry; the delay doubles up to the poll interval."""


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached (refused, reset, timed out,
    starting up, out of connections, an exhausted pool: ``STORE_UNAVAILABLE``): worth
    trying again."""
    if isinstance(exc, TimeoutError | OSError):
        return True
    error = classify(exc)
    return error is not None and error.code == "STORE_UNAVAILABLE"


def _visible(text: str) -> str:
    return text


@contextlib.asynccontextmanager
async def store_when_reachable(
    site: Site, *, wait: float, every: float, hide: Hide = _visible
) -> AsyncIterator[CheckedStore]:
    """``site.open_store()``, retried while the database is unreachable for up to ``wait``
    seconds. Each retry is a WARNING naming the redacted target, the error (``hide``
    keeps a password out of it) and the next delay (backoff from ``FIRST_RETRY`` up to
    ``every`` seconds, so a line at least every ``every`` seconds); an attempt that
    hangs says so every ``every`` seconds too. Past ``wait``, the CLI exits 3.
    ``wait=0`` tries once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    where = site.describe()
    delay = min(FIRST_RETRY, every)
    tries = 0
    while True:
        tries += 1
        stack = contextlib.AsyncExitStack()
        give_up = None if wait == 0 else max(deadline, loop.time() + 1)
        try:
            async with heartbeat(lambda s: f"still connecting to {where} ({s:.1f}s)", every):
                async with asyncio.timeout_at(give_up):
                    store = await stack.enter_async_context(site.open_store())
        except Exception as exc:
            await stack.aclose()
            left = deadline - loop.time()
            if not unreachable(exc) or wait == 0:
                raise
            reason = hide(first_line(exc) if str(exc) else "timed out")
            if left <= 0:
                raise CliError(
                    EXIT_UNREACHABLE,
                    f"cannot reach the database at {where} after waiting {wait:g}s "
                    f"({tries} tries): {reason}",
                ) from None
            pause = min(delay, left)
            log.warning(
                "cannot reach the database at %s (try %d: %s); next try in %.2fs "
                "(gives up in %.0fs)",
                where,
                tries,
                reason,
                pause,
                left,
            )
            await asyncio.sleep(pause)
            delay = min(delay * 2, every)
            continue
        break
    if tries > 1:
        log.warning("connected to %s after %d tries", where, tries)
    async with stack:
        yield store
