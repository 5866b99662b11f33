"""``/healthz`` and ``/readyz``: what the probe says as a worker's hooks feed it, then
a real ``a2pg worker --metrics-port`` scraped while its loop blocks and its database
goes away."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest

from a2pg import NewEvent, Target
from a2pg.errors import StoreUnavailable
from a2pg.observability.metrics import DEFAULT_BEAT_WITHIN, MISSED_BEATS, Verdict, WorkerProbe
from a2pg.store import Store

from ..postgres.fault_proxy import FaultProxy
from ..postgres.test_fault_proxy import proxy
from ..worker.helpers import TIMEOUT
from .process import WorkerProcess, eventually

__all__ = ["proxy"]  # the fixture


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_liveness_follows_the_heartbeat() -> None:
    clock = Clock()
    probe = WorkerProbe(clock=clock)
    assert probe.live() == Verdict(True, "starting: the worker has not begun serving")
    probe.started()
    clock.now += MISSED_BEATS * DEFAULT_BEAT_WITHIN  # no beat yet: the default period
    assert probe.live().ok
    clock.now += 0.1
    assert not probe.live().ok
    probe.beat(0.2)  # a fast heartbeat: the period is its deadline, 1 s at least
    clock.now += 3.0
    assert probe.live() == Verdict(True, "alive: last heartbeat 3.0s ago")
    clock.now += 0.5
    assert probe.live() == Verdict(False, "no heartbeat for 3.5s (bound 3s)")
    probe.beat(20.0)
    clock.now += 59.0
    assert probe.live().ok
    probe.stopped()
    assert probe.live() == Verdict(False, "the worker stopped")


def test_a_given_bound_overrides_the_heartbeats() -> None:
    clock = Clock()
    probe = WorkerProbe(live_within=0.5, ready_within=0.5, clock=clock)
    probe.started()
    assert probe.ready() == Verdict(False, "no answer from the store yet")
    probe.beat(60.0)
    probe.answered()
    clock.now += 0.6
    assert not probe.live().ok
    assert probe.ready() == Verdict(False, "no answer from the store for 0.6s (bound 0.5s)")


def test_readiness_follows_the_stores_answers() -> None:
    clock = Clock()
    probe = WorkerProbe(clock=clock)
    probe.answered()  # before the start (register_consumers): not ready yet
    assert probe.ready() == Verdict(False, "not started: the worker has not begun serving")
    probe.started()
    probe.beat(1.0)
    clock.now += 1.0
    assert probe.ready() == Verdict(True, "ready: the store answered 1.0s ago")
    probe.failed("claim_any", StoreUnavailable("STORE_UNAVAILABLE", "connection refused"))
    clock.now += 2.0
    probe.failed("heartbeat", OSError("reset"))  # still failing since the first
    verdict = probe.ready()
    assert verdict == Verdict(False, "the store fails, for 2.0s (last: heartbeat: OSError: reset)")
    probe.answered()
    assert probe.ready().ok
    clock.now += 3.1  # answers stop (calls hang): 3 heartbeat periods of 1 s
    assert probe.ready() == Verdict(False, "no answer from the store for 3.1s (bound 3s)")
    probe.stopped()
    assert probe.ready() == Verdict(False, "the worker stopped")


# ------------------------------------------------------------------- a real process


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


async def until_status(url: str, status: int, *, within: float = 20.0) -> str:
    """The body of ``url`` once it answers ``status`` (polled every 50 ms)."""
    said: list[str] = []

    async def answers() -> bool:
        code, body = await asyncio.to_thread(get, url)
        said.append(f"{code} {body.strip()}")
        return code == status

    try:
        await eventually(answers, within=within)
    except TimeoutError:
        pytest.fail(f"{url} never answered {status}; last: {said[-3:]}")
    return said[-1]


WORKER = (
    "worker",
    "tests.observability.probe_app:app",
    "--metrics-port",
    "0",
    "--metrics-host",
    "127.0.0.1",
    "--log-level",
    "info",
    "--heartbeat-interval",
    "0.2",  # each beat's deadline is 1 s: 3 missed make 3 s
    "--poll-interval",
    "0.2",
)


def echo(n: int, **payload: float) -> NewEvent:
    return NewEvent("ping", {"n": n, **payload}, targets=[Target("echo")])


async def _serving(worker: WorkerProcess) -> str:
    url = (await worker.wait_for(r"metrics at (http://\S+)/metrics"))[1]
    await worker.wait_for(r"worker \S+ serving echo")
    return str(url)


async def test_healthz_says_not_alive_while_the_loop_is_blocked(
    postgres_dsn: str, postgres_store: Store
) -> None:
    with WorkerProcess(*WORKER, "--dsn", postgres_dsn) as worker:
        base = await _serving(worker)
        assert (await until_status(f"{base}/healthz", 200)).startswith("200 ok: alive")
        assert (await until_status(f"{base}/readyz", 200)).startswith("200 ok: ready")

        await postgres_store.append("b", [echo(1, block=8.0)])
        said = await until_status(f"{base}/healthz", 503, within=8.0)
        assert said.startswith("503 not ok: no heartbeat for 3."), said
        assert (await until_status(f"{base}/healthz", 200)).startswith("200 ok: alive")

        assert await worker.stop() == 0, worker.err
    assert "ended in error" not in worker.err


async def test_readyz_says_not_ready_while_the_database_is_away(
    postgres_dsn: str, postgres_store: Store, proxy: FaultProxy
) -> None:
    with WorkerProcess(*WORKER, "--dsn", proxy.dsn(postgres_dsn)) as worker:
        base = await _serving(worker)
        await postgres_store.append("r", [echo(n) for n in range(3)])
        assert (await until_status(f"{base}/readyz", 200)).startswith("200 ok: ready")

        proxy.refuse(10.0)  # every connection reset, new ones too, for 10 s
        said = await until_status(f"{base}/readyz", 503, within=10.0)
        # Calls fail (a reset) or wait for the pool's refused connections: no answer.
        assert said.startswith(("503 not ok: the store fails", "503 not ok: no answer")), said
        code, alive = await asyncio.to_thread(get, f"{base}/healthz")
        assert (code, alive.split(":")[0]) == (200, "ok")  # its loop runs: alive, not ready

        assert (await until_status(f"{base}/readyz", 200)).startswith("200 ok: ready")
        assert await worker.stop() == 0, worker.err


async def test_a_worker_waiting_for_its_database_is_alive_and_not_ready() -> None:
    """A store pointed at a closed port: the endpoint is up before the database is, and
    says the process lives (restarting it would not help) but is not ready."""
    closed = "postgresql://postgres@127.0.0.1:1/nothing"
    with WorkerProcess(*WORKER, "--dsn", closed, "--wait", "60") as worker:
        base = (await worker.wait_for(r"metrics at (http://\S+)/metrics"))[1]
        code, said = await asyncio.to_thread(get, f"{base}/healthz")
        assert (code, said) == (200, "ok: starting: the worker has not begun serving\n")
        code, said = await asyncio.to_thread(get, f"{base}/readyz")
        assert (code, said) == (503, "not ok: not started: the worker has not begun serving\n")
        await worker.stop()
