"""When the demo's worker processes have connected, on any backend (so startup is not
timed as throughput).

Where the demo runs is an ``a2pg.backends.Site``: it migrates the database, opens the
demo's store and probe, and says how each ``a2pg worker`` reaches it. A backend that
lists its clients (PostgreSQL's ``pg_stat_activity``) counts them through the probe;
for one that does not (a SQLite file), the workers' shared log says who serves.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from ..backends import Probe

SERVING = re.compile(r"a2pg\.worker: worker \S+ serving ")
"""The line each ``a2pg worker`` logs (at INFO) once it serves, its SIGTERM handler in
place: the demo stops no worker before that, so each one stops cleanly."""


async def connected(probe: Probe, prefix: str, log: Path) -> int:
    """How many workers whose names start with ``prefix`` have connected."""
    counted = await probe.connected(prefix)
    if counted is not None:
        return counted

    def serving() -> int:
        if not log.exists():
            return 0
        lines = log.read_text(errors="replace").splitlines()
        return sum(1 for line in lines if SERVING.search(line))

    return await asyncio.to_thread(serving)
