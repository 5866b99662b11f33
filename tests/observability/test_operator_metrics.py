"""The operator's metrics, counted in-process on every backend: the wait before a handler
starts, each attempt's duration by outcome, the process and build series, and no
``_created`` twin of any series."""

from __future__ import annotations

import asyncio
import gzip
import platform
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

from a2pg import A2Error, Head, NewEvent, __version__
from a2pg.ids import FakeClock
from a2pg.observability.metrics import (
    DURATION_OUTCOMES,
    WorkerMetrics,
    serve_metrics,
    without_created,
)
from a2pg.store import Store
from a2pg.worker import App, Worker

from ..worker.helpers import TIMEOUT, bounded, work

BUILD = {"version": __version__, "python": platform.python_version()}


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    assert found is not None, f"no sample {name}{labels}"
    return found


# ------------------------------------------------------------------- the wait


async def test_the_wait_counts_from_the_append_by_the_stores_clock(
    store: Store, clock: FakeClock
) -> None:
    """Events appended 7.5 s (by the store's clock) before the claim waited 7.5 s and a
    little: the store's clock from append to claim, the worker's from claim to handler;
    the worker's wall clock, years away from the fake one, is never compared with it."""

    async def ok(head: Head) -> None:
        return None

    metrics = WorkerMetrics()
    await store.append("s", [work(n) for n in range(3)])
    clock.advance(7.5)
    await bounded(Worker(store, App({"w": ok}), hooks=metrics).run_until_idle())

    r = metrics.registry
    assert value(r, "a2pg_attempt_wait_seconds_count", consumer="w") == 3
    assert value(r, "a2pg_attempt_wait_seconds_bucket", consumer="w", le="5.0") == 0
    assert value(r, "a2pg_attempt_wait_seconds_bucket", consumer="w", le="10.0") == 3
    assert value(r, "a2pg_attempt_wait_seconds_sum", consumer="w") >= 3 * 7.5


async def test_a_retry_waits_from_its_backoffs_end(store: Store, clock: FakeClock) -> None:
    """A retry's wait starts when its backoff (0.5 to 1 s: the default) ended, not at the
    append: run 600 s after the failure, it waited 599 s and some, never 600."""
    attempts: list[int] = []

    async def flaky(head: Head) -> None:
        attempts.append(head.attempt)
        if head.attempt == 1:
            raise RuntimeError("first attempt fails")

    metrics = WorkerMetrics()
    worker = Worker(store, App({"w": flaky}), hooks=metrics)
    await store.append("s", [work(1)])
    await bounded(worker.run_until_idle())
    clock.advance(600)  # past any backoff
    await bounded(worker.run_until_idle())

    r = metrics.registry
    assert attempts == [1, 2]
    assert value(r, "a2pg_attempts_started_total", consumer="w") == 2
    assert value(r, "a2pg_attempt_wait_seconds_count", consumer="w") == 2
    assert value(r, "a2pg_attempt_wait_seconds_bucket", consumer="w", le="1.0") == 1
    assert 599 <= value(r, "a2pg_attempt_wait_seconds_sum", consumer="w") < 600


# ----------------------------------------------------------- duration by outcome


async def test_the_duration_says_how_each_attempt_ended(store: Store) -> None:
    app = App()

    @app.consumer("ok")
    async def ok(head: Head) -> list[NewEvent]:
        return [NewEvent("done")]

    @app.consumer("bad")
    async def bad(head: Head) -> None:
        raise RuntimeError("always")

    @app.consumer("slow", timeout=0.05)
    async def slow(head: Head) -> None:
        await asyncio.sleep(TIMEOUT)

    metrics = WorkerMetrics()
    await store.append("s", [work(1, to="ok"), work(2, to="ok"), work(3, to="bad")])
    await store.append("t", [work(4, to="slow")])
    await bounded(Worker(store, app, hooks=metrics, max_failures=1).run_until_idle())

    r = metrics.registry

    def count(consumer: str, outcome: str) -> float:
        return value(r, "a2pg_attempt_duration_seconds_count", consumer=consumer, outcome=outcome)

    assert count("ok", "completed") == 2
    assert count("bad", "dead_lettered") == 1
    assert count("slow", "timed_out") == 1
    assert count("slow", "dead_lettered") == 0  # counted as timed out instead
    assert value(r, "a2pg_attempts_dead_lettered_total", consumer="slow") == 1  # as before
    for consumer in ("ok", "bad", "slow"):  # every outcome's series exists, at zero if none
        assert {o for o in DURATION_OUTCOMES if count(consumer, o) >= 0} == set(DURATION_OUTCOMES)


# ------------------------------------------------------ process, build, _created


def test_its_own_registry_has_process_and_build_series_and_no_created() -> None:
    metrics = WorkerMetrics()
    metrics.started("h", ["c"])
    metrics.wakeup()
    text = generate_latest(metrics.registry).decode()
    assert "_created" not in text
    openmetrics = openmetrics_latest(metrics.registry).decode()  # type: ignore[no-untyped-call]
    assert "_created" not in openmetrics
    assert "a2pg_wakeups_total 1.0" in text
    r = metrics.registry
    assert value(r, "a2pg_build_info", **BUILD) == 1
    assert value(r, "python_gc_collections_total", generation="0") >= 0
    assert any(line.startswith("python_info{") for line in text.splitlines())
    if sys.platform == "linux":
        assert value(r, "process_resident_memory_bytes") > 0


def test_a_given_registry_is_left_as_it_is() -> None:
    """No process collectors added to it (the global one has them: registering twice
    would fail), and its own counters keep their ``_created`` (no global switch)."""
    given = CollectorRegistry()
    theirs = Counter("their_requests", "their own", registry=given)
    theirs.inc()
    metrics = WorkerMetrics(given)
    metrics.started("h", ["c"])
    assert metrics.registry is given
    assert given.get_sample_value("their_requests_created") is not None
    assert given.get_sample_value("a2pg_attempts_started_created", {"consumer": "c"}) is not None
    assert given.get_sample_value("process_resident_memory_bytes") is None
    assert given.get_sample_value("a2pg_build_info", BUILD) == 1
    asked = WorkerMetrics(CollectorRegistry(), process_metrics=True).registry
    assert asked.get_sample_value("python_gc_objects_collected_total", {"generation": "0"})


def test_without_created_drops_only_created_samples() -> None:
    given = CollectorRegistry()
    Counter("a_created_thing", "a counter whose name says created", registry=given).inc()
    names = {s.name for m in without_created(given.collect()) for s in m.samples}
    assert names == {"a_created_thing_total"}


@pytest.mark.parametrize(
    "options",
    [
        {"live_within": 0},
        {"live_within": -1.0},
        {"ready_within": float("nan")},
        {"ready_within": float("inf")},
        {"live_within": "5"},
        {"ready_within": True},
        {"process_metrics": "yes"},
        {"process_metrics": 1},
        {"registry": object()},
    ],
)
def test_bad_options_are_invalid_arguments(options: dict[str, Any]) -> None:
    with pytest.raises(A2Error) as raised:
        WorkerMetrics(**options)
    assert raised.value.code == "INVALID_ARGUMENT"
    assert next(iter(options)) in str(raised.value)


# -------------------------------------------------------------- the HTTP server


def _get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


async def test_the_server_serves_metrics_and_probes_and_nothing_else() -> None:
    metrics = WorkerMetrics()
    metrics.started("h", ["c"])
    with serve_metrics(metrics.registry, "127.0.0.1", 0) as endpoint:
        status, headers, body = await asyncio.to_thread(_get, endpoint.url)
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        assert b"a2pg_attempts_started_total" in body and b"_created" not in body

        accept = "application/openmetrics-text; version=1.0.0"
        status, headers, body = await asyncio.to_thread(_get, endpoint.url, Accept=accept)
        assert status == 200 and "openmetrics" in headers["Content-Type"]
        assert body.endswith(b"# EOF\n") and b"_created" not in body

        gzipped = await asyncio.to_thread(_get, endpoint.url, **{"Accept-Encoding": "gzip"})
        assert b"a2pg_wakeups_total" in gzip.decompress(gzipped[2])

        some = await asyncio.to_thread(_get, endpoint.url + "?name[]=a2pg_wakeups_total")
        assert b"a2pg_wakeups_total" in some[2] and b"a2pg_polls" not in some[2]

        for path in ("/", "/metricsx", "/favicon.ico", "/healthz/x"):
            status, _, body = await asyncio.to_thread(_get, endpoint.at(path))
            assert status == 404, path
        post = urllib.request.Request(endpoint.url, data=b"", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            await asyncio.to_thread(urllib.request.urlopen, post, timeout=TIMEOUT)
        assert refused.value.code == 405


async def test_a_plain_registry_is_served_without_created_and_probes_say_no_worker() -> None:
    """``a2pg metrics --port`` serves a plain registry: no worker, so both probes say the
    process serves; a user's registry is served without ``_created`` but left as it is."""
    given = CollectorRegistry()
    Counter("their_requests", "their own", registry=given).inc()
    with serve_metrics(given, "127.0.0.1", 0) as endpoint:
        _, _, body = await asyncio.to_thread(_get, endpoint.url)
        assert b"their_requests_total 1.0" in body and b"_created" not in body
        for path in ("/healthz", "/readyz"):
            status, _, said = await asyncio.to_thread(_get, endpoint.at(path))
            assert (status, said) == (200, b"ok: serving (no worker in this process)\n")
    assert given.get_sample_value("their_requests_created") is not None
