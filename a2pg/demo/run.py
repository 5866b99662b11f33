"""``a2pg demo``: chat sessions worked by several ``a2pg worker`` processes, then verified.

The workload: every session gets user turns (``chat.user``), each targeted at the
``demo-reply`` lane (one reply at a time, in turn order) and at ``demo-moderate``
(an event cursor: concurrent). A log consumer, ``demo-audit``, follows every user
turn and reply. Handlers fail on about 10% of first and second attempts (by hash, so
runs are reproducible) and one poison turn always fails: it is dead-lettered, its
lane shows as blocked, and the demo redrives it with ``skip``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backends import Probe, Site
from ..models import Head, LogSpec, NewEvent, Target
from ..store import Store
from ..worker import App
from .checks import (
    AUDIT,
    AUDIT_CONSUMER,
    AUDIT_LANE,
    MODERATE_CONSUMER,
    REPLY,
    REPLY_CONSUMER,
    REPLY_LANE,
    USER,
    VERDICT,
    Check,
    PoisonReport,
    Tally,
    flaky,
    tally_session,
)
from .checks import checks as judge
from .config import DemoConfig
from .progress import ProgressBar
from .targets import connected

app = App()

APPEND_CONCURRENCY = 8
POLL_SECONDS = 0.2
STALL_SECONDS = 3.0
STARTUP_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0
MAX_FAILURES = 4
RETRY_BASE = 0.05
RETRY_CAP = 0.2


class DemoFailed(RuntimeError):
    """The demo could not run its workload (its workers did not start)."""


class Flaky(RuntimeError):
    """A simulated transient failure (a timeout of some downstream service)."""


class Poison(RuntimeError):
    """A simulated permanent failure: this event can never be processed."""


def _check_flaky(head: Head) -> None:
    if flaky(head.session_id, head.consumer, head.index, head.attempt):
        raise Flaky(f"simulated timeout on attempt {head.attempt}")


def _result(head: Head, **payload: Any) -> dict[str, Any]:
    """Result payloads carry the attempt facts the verification reads back."""
    return {**payload, "attempt": head.attempt, "failures": head.failure_count}


@app.consumer(REPLY_CONSUMER)
async def reply(head: Head) -> list[NewEvent]:
    """Answers one user turn; its lane makes the answers come in turn order."""
    payload = head.event.payload
    if payload.get("poison"):
        raise Poison("this message crashes the reply model every time")
    _check_flaky(head)
    text = f"re: {payload['text']}"
    return [NewEvent(REPLY, _result(head, turn=payload["turn"], text=text))]


@app.consumer(MODERATE_CONSUMER)
async def moderate(head: Head) -> list[NewEvent]:
    """Scores one user turn, concurrently with everything else."""
    _check_flaky(head)
    text = str(head.event.payload["text"])
    return [NewEvent(VERDICT, _result(head, flagged="spam" in text))]


@app.consumer(AUDIT_CONSUMER, log=LogSpec(lane=AUDIT_LANE, types=(USER, REPLY)))
async def audit(head: Head) -> list[NewEvent]:
    """Follows the whole conversation, one event after another."""
    _check_flaky(head)
    return [NewEvent(AUDIT, _result(head, seen=head.event.type))]


# Consumer names as the verification knows them; App names must match.
assert {c.name for c in app.consumers} == {REPLY_CONSUMER, MODERATE_CONSUMER, AUDIT_CONSUMER}


@dataclass(slots=True)
class DemoRun:
    run_id: str
    config: DemoConfig
    poison: PoisonReport = field(default_factory=PoisonReport)
    appended: int = 0
    append_seconds: float = 0.0
    drain_seconds: float = 0.0
    worker_exits: list[int | None] = field(default_factory=list)
    worker_log: str = ""
    timed_out: bool = False
    checks: list[Check] = field(default_factory=list)
    server: str = ""
    dead_letters: list[Head] = field(default_factory=list)

    def session_id(self, i: int) -> str:
        return f"demo-{self.run_id}-{i:04d}"


def user_turn(session: str, turn: int, *, poison: bool) -> NewEvent:
    text = f"message {turn} of {session}" + (" (buy spam now)" if turn % 7 == 3 else "")
    return NewEvent(
        USER,
        {"turn": turn, "text": text, "poison": poison},
        id=f"{session}-turn-{turn}",
        targets=(Target(REPLY_CONSUMER, REPLY_LANE), Target(MODERATE_CONSUMER)),
    )


async def append_workload(store: Store, run: DemoRun) -> None:
    """Appends the turns round by round (every session's turn 1, then 2...), as chats do."""
    poison_session = run.session_id(run.config.sessions // 2)
    poison_turn = max(1, run.config.turns // 2)
    gate = asyncio.Semaphore(APPEND_CONCURRENCY)
    started = time.perf_counter()

    async def one(session: str, turn: int) -> None:
        poison = session == poison_session and turn == poison_turn
        async with gate:
            result = await store.append(
                session, [user_turn(session, turn, poison=poison)], consumers=app.consumers
            )
        run.appended += 1
        if poison:
            run.poison.session_id = session
            run.poison.index = result.events[0].index

    for turn in range(1, run.config.turns + 1):
        sessions = [run.session_id(i) for i in range(run.config.sessions)]
        await asyncio.gather(*(one(s, turn) for s in sessions))
    run.append_seconds = time.perf_counter() - started


async def start_workers(run: DemoRun, site: Site, log: Path) -> list[Any]:
    """``a2pg worker a2pg.demo:app`` processes, each named ``a2pg-demo-<run>-w<n>``, reaching
    the database as ``site`` says."""
    procs = []
    for n in range(run.config.workers):
        options, changes = site.worker_options(f"a2pg-demo-{run.run_id}-w{n}")
        env = {**os.environ, **changes}
        args = [
            *("-m", "a2pg.cli", "worker", "a2pg.demo:app"),
            *("--concurrency", str(run.config.concurrency)),
            *("--max-failures", str(MAX_FAILURES)),
            *("--retry-base", str(RETRY_BASE), "--retry-cap", str(RETRY_CAP)),
            *("--log-level", "WARNING"),
            *options,
        ]
        with log.open("ab") as sink:
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable, *args, env=env, stdout=sink, stderr=sink
                )
            )
    return procs


def _log_tail(log: Path, chars: int = 2000) -> str:
    """The end of the workers' shared output file (small: read at start failure or the end)."""
    return log.read_text(errors="replace")[-chars:] if log.exists() else ""


async def wait_connected(probe: Probe, run: DemoRun, procs: list[Any], log: Path) -> None:
    """Until every worker process has connected (so startup is not timed as throughput)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    prefix = f"a2pg-demo-{run.run_id}-w"
    while await connected(probe, prefix, log) < len(procs):
        if any(p.returncode is not None for p in procs) or time.monotonic() > deadline:
            lines = _log_tail(log).strip().splitlines()
            raise DemoFailed("demo workers did not start: " + (lines[-1] if lines else "no output"))
        await asyncio.sleep(POLL_SECONDS)


async def stop_workers(procs: list[Any]) -> list[int | None]:
    """SIGTERM, then wait for a clean exit; SIGKILL whoever overstays."""
    for proc in procs:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
    codes: list[int | None] = []
    for proc in procs:
        try:
            codes.append(await asyncio.wait_for(proc.wait(), STOP_TIMEOUT))
        except TimeoutError:
            proc.kill()
            await proc.wait()
            codes.append(None)
    return codes


async def handle_poison(store: Store, run: DemoRun) -> None:
    """Records the poison's dead letter as listings show it, then skips it."""
    heads = await store.dead_letters(run.poison.session_id)
    run.dead_letters = heads
    for head in heads:
        if head.index == run.poison.index and head.consumer == REPLY_CONSUMER:
            cursors = await store.cursors(run.poison.session_id)
            lane = [c for c in cursors if c.consumer == REPLY_CONSUMER and c.lane == REPLY_LANE]
            run.poison.dead_lettered = True
            run.poison.blocked = bool(lane) and lane[0].blocked
            run.poison.failures = head.failure_count
            run.poison.error = head.dispatch.error_line()
    result = await store.redrive(
        run.poison.session_id, consumer=REPLY_CONSUMER, index=run.poison.index, action="skip"
    )
    run.poison.redriven = result.redriven


async def drain(store: Store, probe: Probe, run: DemoRun, bar: ProgressBar) -> None:
    """Waits until all work is done, redriving the poison once the rest has settled."""
    started = time.perf_counter()
    bar.start()
    base = await probe.counts()
    appending = asyncio.create_task(append_workload(store, run), name="a2pg-demo-append")
    last_change, last_results = time.monotonic(), -1
    poison_handled = False
    try:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            counts = await probe.counts()
            done = counts.events - base.events - run.appended  # the results appended
            bar.update(done, note=f"dead letters {counts.dead - base.dead}")
            if done != last_results:
                last_change, last_results = time.monotonic(), done
            if appending.done() and appending.exception() is not None:
                break  # re-raised below
            if not appending.done() or counts.live:
                pass
            elif not poison_handled and counts.dead > base.dead:
                poison_handled = True
                bar.say("the poison turn is dead-lettered and blocks its lane: redriving it (skip)")
                await handle_poison(store, run)
            elif done >= run.config.units or time.monotonic() - last_change > STALL_SECONDS:
                break
            if time.perf_counter() - started > run.config.timeout:
                run.timed_out = True
                break
        await appending
    finally:
        if not appending.done():
            appending.cancel()
    run.drain_seconds = time.perf_counter() - started
    bar.finish(done)


async def verify(store: Store, run: DemoRun) -> list[Check]:
    tally = Tally()
    for i in range(run.config.sessions):
        session = run.session_id(i)
        tally_session(tally, session, await store.read(session))
    if run.poison.session_id:
        run.poison.cleared = not await store.dead_letters(run.poison.session_id)
    result = judge(tally, poison=run.poison)
    clean = all(code == 0 for code in run.worker_exits)
    result.append(
        Check(
            "workers stopped cleanly",
            clean and not run.timed_out,
            f"{len(run.worker_exits)} processes, exit codes {run.worker_exits}"
            + (f"; timed out after {run.config.timeout:.0f} s" if run.timed_out else ""),
        )
    )
    return result


async def run_demo(site: Site, config: DemoConfig, bar: ProgressBar) -> DemoRun:
    """Runs the demo on ``site`` (``a2pg.backends.select``), whose settings (a pooler's)
    every store it opens has, its worker processes' too."""
    bar.say("migrating")
    await site.migrate()
    run = DemoRun(run_id=uuid.uuid4().hex[:8], config=config)
    with tempfile.TemporaryDirectory(prefix="a2pg-demo-") as tmp:
        log = Path(tmp) / "workers.log"
        async with site.open_store() as store:
            await store.register_consumers(app.consumers)
            probe = await site.probe()
            run.server = await probe.server()
            bar.say(f"starting {config.workers} worker processes: a2pg worker a2pg.demo:app")
            procs = await start_workers(run, site, log)
            try:
                await wait_connected(probe, run, procs, log)
                bar.say(
                    f"appending {config.sessions} sessions x {config.turns} turns while the "
                    "workers run"
                )
                await drain(store, probe, run, bar)
            finally:
                bar.say("stopping the workers (SIGTERM)")
                run.worker_exits = await stop_workers(procs)
                await probe.close()
                run.worker_log = _log_tail(log)
                # Leave no demo consumer behind in a database of the user's.
                await store.unregister_consumers([AUDIT_CONSUMER])
            bar.say("verifying the event log")
            run.checks = await verify(store, run)
    return run
