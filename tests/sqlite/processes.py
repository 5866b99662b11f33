"""Worker processes on one SQLite file for the process tests: started, waited on, stopped."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from a2pg.models import NewEvent, Target
from a2pg.store import Store

from .jobs import JOB, RESULT

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: workers import ``tests.sqlite.jobs`` from here."""

STOP_TIMEOUT = 30.0


async def start_worker(
    path: Path, *options: str, env: Mapping[str, str] | None = None
) -> asyncio.subprocess.Process:
    """``a2pg worker --sqlite PATH tests.sqlite.jobs:app`` as a process of its own."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    args = ["-m", "a2pg.cli", "worker", "--sqlite", str(path), "tests.sqlite.jobs:app"]
    return await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        *options,
        "--log-level",
        "WARNING",
        cwd=ROOT,
        env=environment,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def stop(proc: asyncio.subprocess.Process) -> tuple[int | None, str]:
    """SIGTERM (drain), then its exit code and what it wrote to stderr; SIGKILL on a hang."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), STOP_TIMEOUT)
    except TimeoutError:
        proc.kill()
        _, err = await proc.communicate()
        return None, err.decode(errors="replace")
    return proc.returncode, err.decode(errors="replace")


def jobs(count: int) -> list[NewEvent]:
    return [NewEvent("job.input", {"n": n}, targets=(Target(JOB),)) for n in range(count)]


async def fill(store: Store, sessions: list[str], per_session: int) -> None:
    """``per_session`` jobs in each session, appended in batches."""
    for session_id in sessions:
        await store.append(session_id, jobs(per_session))


async def eventually(check: Callable[[], Awaitable[bool]], *, within: float) -> None:
    """Polls ``check`` (a read of the store) until it holds, for at most ``within`` s."""

    async def poll() -> None:
        while not await check():  # noqa: ASYNC110 - the file changes in other processes
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), within)


async def outstanding(store: Store) -> int:
    """Heads still to run in every session (ready, held or backing off)."""
    return sum(info.pending for info in await store.sessions(limit=1000))


async def held(store: Store, sessions: list[str]) -> int:
    """Heads under a claim in these sessions."""
    count = 0
    for session_id in sessions:
        cursors = await store.cursors(session_id)
        count += sum(1 for c in cursors if c.dispatch.claim_holder is not None)
    return count


async def results(store: Store, session_id: str) -> dict[int, list[dict[str, int]]]:
    """The results appended in a session, by the index of the job they completed."""
    found: dict[int, list[dict[str, int]]] = {}
    for event in await store.read(session_id):
        if event.type == RESULT:
            assert event.cause is not None
            found.setdefault(event.cause.index, []).append(event.payload)
    return found
