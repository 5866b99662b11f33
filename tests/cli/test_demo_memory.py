"""The demo's app, workload and verification, run in-process on MemoryStore with a FakeClock."""

from __future__ import annotations

from a2pg.backoff import Backoff
from a2pg.demo import DemoConfig
from a2pg.demo.run import (
    MAX_FAILURES,
    DemoRun,
    app,
    append_workload,
    handle_poison,
    verify,
)
from a2pg.ids import FakeClock
from a2pg.memory import MemoryStore
from a2pg.worker import Worker


async def outstanding(store: MemoryStore) -> tuple[int, int]:
    sessions = await store.sessions(limit=1000)
    return sum(s.pending for s in sessions), sum(s.dead_letters for s in sessions)


async def test_the_demo_workload_verifies_on_the_reference_store() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    await store.register_consumers(app.consumers)
    run = DemoRun(run_id="mem", config=DemoConfig(sessions=12, turns=5))
    await append_workload(store, run)
    worker = Worker(
        store,
        app,
        concurrency=8,
        max_failures=MAX_FAILURES,
        backoff=Backoff(base=0.05, cap=0.2, jitter=0),
    )
    for _ in range(100):
        await worker.run_until_idle()
        pending, dead = await outstanding(store)
        if not pending and dead and not run.poison.redriven:
            await handle_poison(store, run)
        elif not pending and not dead:
            break
        clock.advance(1)  # past every backoff
    checks = await verify(store, run)
    failed = [c for c in checks if not c.ok]
    assert not failed, failed
    assert run.poison.dead_lettered and run.poison.blocked
    assert run.poison.failures == MAX_FAILURES


async def test_the_verification_fails_when_the_poison_is_never_redriven() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    await store.register_consumers(app.consumers)
    run = DemoRun(run_id="mem", config=DemoConfig(sessions=3, turns=4))
    await append_workload(store, run)
    worker = Worker(store, app, max_failures=MAX_FAILURES, backoff=Backoff(0.05, 0.2, 0))
    for _ in range(20):
        await worker.run_until_idle()
        clock.advance(1)
    verdicts = {c.name: c.ok for c in await verify(store, run)}
    assert not verdicts["exactly once"]  # the turns queued behind the poison never ran
    assert not verdicts["poison skipped by redrive"]
