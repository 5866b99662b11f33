"""The backfills a worker runs: each log consumer it registers with ``backfill``, batch by batch.

Registering a log consumer with ``backfill`` starts (or, for a changed spec, restarts) its
backfill in the registry; a worker then calls ``Store.backfill`` until it reports done,
alongside its claims. The progress is the registry's, so a worker killed half-way leaves
it for the next one to resume, and several workers at once only share the batches.
"""

from __future__ import annotations

import asyncio
import logging

from ..errors import A2Error
from ..store import Store
from .health import StoreHealth

log = logging.getLogger("a2pg.worker")

BATCH_SESSIONS = 100
"""Sessions per ``Store.backfill`` call: each is its own short transaction."""


async def run_backfill(store: Store, name: str, *, health: StoreHealth, retry_after: float) -> None:
    """Runs consumer ``name``'s backfill to its end (or until cancelled); a failed batch is
    tried again after ``retry_after`` seconds (an outage), a refused one ends the loop."""
    while True:
        try:
            async with health.call("backfill"):
                progress = await store.backfill(name, limit=BATCH_SESSIONS)
        except asyncio.CancelledError:
            raise
        except A2Error as error:
            if error.code != "STORE_UNAVAILABLE":
                log.error("backfill of %s refused: %s", name, error)
                return
            await asyncio.sleep(retry_after)
            continue
        except Exception:  # a database error the store did not classify: try again later
            await asyncio.sleep(retry_after)
            continue
        if progress is None:
            return
        if progress.done_at is not None:
            log.info("backfill of %s done: %d sessions", name, progress.sessions)
            return
        log.debug("backfill of %s: %d sessions, after %r", name, progress.sessions, progress.after)
