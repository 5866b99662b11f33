"""Worker metrics: counted in-process on every backend, and scraped over HTTP from a real
``a2pg worker --metrics-port`` process whose counters must equal what the store says."""

from __future__ import annotations

import asyncio
import platform
import socket
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from a2pg import Head, NewEvent, Target, __version__
from a2pg.ids import FakeClock
from a2pg.observability.metrics import DURATION_OUTCOMES, WorkerMetrics
from a2pg.store import Store
from a2pg.worker import App, Worker

from ..worker.helpers import TIMEOUT, bounded, until, work
from .conftest import Cli
from .process import WITHOUT_EXTRAS, WorkerProcess, eventually, run_a2pg

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
PYTHON = platform.python_version()


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    assert found is not None, f"no sample {name}{labels}"
    return found


async def test_a_worker_counts_its_attempts_by_consumer(store: Store) -> None:
    app = App()

    @app.consumer("ok")
    async def ok(head: Head) -> list[NewEvent]:
        return [NewEvent("done")]

    @app.consumer("bad")
    async def bad(head: Head) -> None:
        raise RuntimeError("always")

    metrics = WorkerMetrics()
    await store.append("s", [work(n, to="ok") for n in range(3)] + [work(9, to="bad")])
    worker = Worker(store, app, hooks=metrics, max_failures=1)
    await bounded(worker.run_until_idle())

    r = metrics.registry
    assert value(r, "a2pg_attempts_started_total", consumer="ok") == 3
    assert value(r, "a2pg_attempts_completed_total", consumer="ok") == 3
    assert value(r, "a2pg_attempts_started_total", consumer="bad") == 1
    assert value(r, "a2pg_attempts_dead_lettered_total", consumer="bad") == 1
    assert value(r, "a2pg_attempts_completed_total", consumer="bad") == 0
    for consumer in ("ok", "bad"):
        assert value(r, "a2pg_attempts_in_flight", consumer=consumer) == 0
        assert value(r, "a2pg_attempts_failed_total", consumer=consumer) == 0
    assert value(r, "a2pg_attempt_duration_seconds_count", consumer="ok", outcome="completed") == 3
    assert value(r, "a2pg_claim_batch_size_sum") == 4  # every head came in some claim
    assert value(r, "a2pg_completion_batch_size_sum") == 3
    calls = value(r, "a2pg_store_call_duration_seconds_count", op="fail_attempt")
    assert calls == 1
    assert (len(await store.dead_letters("s")), worker.stats.completed) == (1, 3)


async def test_renewals_lapses_and_in_flight_are_counted(store: Store, clock: FakeClock) -> None:
    gate = asyncio.Event()
    started: list[int] = []

    async def slow(head: Head) -> None:
        started.append(head.index)
        await gate.wait()

    metrics = WorkerMetrics()
    r = metrics.registry
    # One slot, held by the blocked handler: once the clock passes the lease, the worker
    # could otherwise re-claim the lapsed head itself (a poll or a late wakeup), and two
    # attempts would be released at the stop (seen once in CI, on SQLite).
    async with Worker(store, App({"w": slow}), hooks=metrics, ttl=30, concurrency=1) as worker:
        await store.append("s", [work(1)])
        await until(lambda: started == [1])
        assert value(r, "a2pg_attempts_in_flight", consumer="w") == 1
        await worker.renew_leases(force=True)
        assert value(r, "a2pg_lease_renewals_total", consumer="w") == 1
        clock.advance(31)  # the lease runs out and nobody takes the head: neither renewed
        await worker.renew_leases(force=True)  # nor superseded, so lapsed
        assert value(r, "a2pg_lease_lapses_total", consumer="w") == 1
        worker.stop(force=True)
    assert value(r, "a2pg_attempts_in_flight", consumer="w") == 0
    assert value(r, "a2pg_attempts_released_total", consumer="w") == 1


def test_each_worker_has_a_registry_of_its_own() -> None:
    first, second = WorkerMetrics(), WorkerMetrics()
    first.started("h", ["c"])
    first.wakeup()
    assert first.registry.get_sample_value("a2pg_wakeups_total") == 1
    assert second.registry.get_sample_value("a2pg_wakeups_total") == 0


# ------------------------------------------------------------------- a real process


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), float("nan"))


async def _store_says(store: Store, session: str) -> dict[str, int]:
    """What the store shows was done: completions, the failures before them, dead letters."""
    echoed = [e for e in await store.read(session) if e.type == "echoed"]
    dead = await store.dead_letters(session)
    return {
        "completed": len(echoed),
        "failed": sum(e.payload["attempt"] - 1 for e in echoed)
        + sum(head.failure_count - 1 for head in dead),
        "dead_lettered": len(dead),
    }


def _scraped(samples: Samples) -> dict[str, int]:
    return {
        what: int(sample(samples, f"a2pg_attempts_{what}_total", consumer="echo"))
        for what in ("completed", "failed", "dead_lettered")
    }


def _wave(start: int, kinds: Iterator[str | None]) -> list[NewEvent]:
    return [
        NewEvent("ping", {"n": start + n, "kind": kind}, targets=[Target("echo")])
        for n, kind in enumerate(kinds)
    ]


async def test_a_running_worker_serves_metrics_that_match_the_store(
    postgres_dsn: str, postgres_store: Store
) -> None:
    store = postgres_store
    argv = (
        "worker",
        "tests.observability.sample_app:app",
        "--dsn",
        postgres_dsn,
        "--metrics-port",
        "0",
        "--metrics-host",
        "127.0.0.1",
        "--log-level",
        "info",
        "--max-failures",
        "2",
        "--retry-base",
        "0.02",
        "--retry-cap",
        "0.02",
        "--poll-interval",
        "30",  # so the second wave can only arrive by a wakeup
    )
    with WorkerProcess(*argv) as worker:
        url = (await worker.wait_for(r"metrics at (http://\S+/metrics)"))[1]
        await worker.wait_for(r"worker \S+ serving echo")

        await store.append("m", _wave(0, iter([None] * 6 + ["flaky", "poison"])))
        await _until_done(store, "m", completed=7, dead=1)
        await store.append("m", _wave(100, iter([None] * 4)))
        expected = await _until_done(store, "m", completed=11, dead=1)
        assert expected == {"completed": 11, "failed": 2, "dead_lettered": 1}

        samples = await _until_scraped(url, expected)
        started = sample(samples, "a2pg_attempts_started_total", consumer="echo")
        assert started == 11 + 2 + 1  # every attempt ended one way
        assert sample(samples, "a2pg_attempts_superseded_total", consumer="echo") == 0
        assert sample(samples, "a2pg_attempts_in_flight", consumer="echo") == 0
        durations = {
            outcome: sample(
                samples, "a2pg_attempt_duration_seconds_count", consumer="echo", outcome=outcome
            )
            for outcome in DURATION_OUTCOMES
        }
        assert sum(durations.values()) == started
        assert (durations["completed"], durations["failed"], durations["dead_lettered"]) == (
            11,
            2,
            1,
        )
        waits = sample(samples, "a2pg_attempt_wait_seconds_count", consumer="echo")
        assert waits == started  # every attempt, retries too
        assert sample(samples, "process_resident_memory_bytes") > 0
        assert sample(samples, "a2pg_build_info", version=__version__, python=PYTHON) == 1
        with await asyncio.to_thread(urllib.request.urlopen, url, timeout=TIMEOUT) as response:
            assert b"_created" not in response.read()
        assert sample(samples, "a2pg_wakeups_total") >= 1
        assert sample(samples, "a2pg_completion_batch_size_sum") == 11
        assert sample(samples, "a2pg_claim_batch_size_sum") == started
        round_trips = sum(
            sample(samples, "a2pg_store_call_duration_seconds_count", op=op)
            for op in ("claim_any", "complete_and_claim")
        )
        assert round_trips >= 1
        assert sample(samples, "a2pg_store_call_duration_seconds_count", op="fail_attempt") == 3

        assert await worker.stop() == 0, worker.err
    assert "ended in error" not in worker.err  # (the failures on purpose log tracebacks)


async def _until_done(store: Store, session: str, *, completed: int, dead: int) -> dict[str, int]:
    said: dict[str, int] = {}

    async def done() -> bool:
        nonlocal said
        said = await _store_says(store, session)
        return said["completed"] >= completed and said["dead_lettered"] >= dead

    await eventually(done)
    return said


async def _until_scraped(url: str, expected: dict[str, int]) -> Samples:
    """Scrapes until the counters show what the store shows (they follow its answers)."""
    samples: Samples = {}

    async def caught_up() -> bool:
        nonlocal samples
        samples = await asyncio.to_thread(scrape, url)
        return _scraped(samples) == expected

    try:
        await eventually(caught_up, within=TIMEOUT)
    except TimeoutError:
        pytest.fail(f"the metrics never matched the store: {_scraped(samples)} != {expected}")
    return samples


# ------------------------------------------------------------------- usage errors


def test_metrics_port_without_the_extra_is_a_one_line_error() -> None:
    code, err = run_a2pg(
        "worker",
        "tests.observability.sample_app:app",
        "--dsn",
        "postgresql://postgres@127.0.0.1:1/nothing",
        "--metrics-port",
        "0",
        blocked=WITHOUT_EXTRAS,
    )
    assert code == 2
    assert err == (
        "a2pg: error: --metrics-port needs prometheus-client, which is not installed: "
        "pip install 'a2pg[metrics]'\n"
    )


def test_a_metrics_port_in_use_is_a_usage_error(cli: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = cli(
            "worker",
            "tests.observability.sample_app:app",
            "--dsn",
            "postgresql://postgres@127.0.0.1:1/nothing",
            "--metrics-port",
            str(port),
            "--metrics-host",
            "127.0.0.1",
        )
    assert code == 2
    assert err == f"a2pg: error: cannot serve metrics on 127.0.0.1:{port}: Address already in use\n"


@pytest.mark.parametrize("bad", ["-1", "65536", "http"])
def test_a_bad_metrics_port_is_refused(cli: Cli, bad: str) -> None:
    code, err = cli("worker", "x:app", "--dsn", "postgresql://h/d", "--metrics-port", bad)
    assert code == 2
    assert "--metrics-port" in err


@pytest.mark.parametrize(
    "argv",
    [
        (
            "worker",
            "tests.observability.sample_app:app",
            "--metrics-port",
            "0",
            "--log-level",
            "info",
        ),
        ("metrics", "--port", "0"),
    ],
    ids=["worker", "metrics"],
)
async def test_metrics_listen_on_loopback_unless_told_otherwise(
    postgres_dsn: str, argv: tuple[str, ...]
) -> None:
    """The endpoint has no authentication: like the dashboard, it stays on this machine
    unless ``--metrics-host``/``--host`` (0.0.0.0 in a container) says otherwise."""
    with WorkerProcess(*argv, "--dsn", postgres_dsn) as served:
        url = (await served.wait_for(r"metrics at (http://\S+/metrics)"))[1]
        assert url.startswith("http://127.0.0.1:"), url
        await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=TIMEOUT).close())
