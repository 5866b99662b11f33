"""The store's gauges: read on scrape (cached), printed by ``a2pg metrics --once`` (text and
JSON), served by ``a2pg metrics --port`` and beside a worker's own (``--metrics-store``)."""

from __future__ import annotations

import asyncio
import io
import json
import urllib.request
from datetime import UTC, datetime

import pytest
from prometheus_client.parser import text_string_to_metric_families

from a2pg import Consumer, ConsumerStats, LogSpec, NewEvent, Target, WorkerBeat
from a2pg.cli import main
from a2pg.observability.collector import StoreCollector
from a2pg.observability.snapshot import CONSUMER_GAUGES, gauge_value
from a2pg.postgres import PostgresStore
from a2pg.store import Store

from ..worker.helpers import TIMEOUT, work
from .conftest import Cli
from .process import WITHOUT_EXTRAS, WorkerProcess, eventually, run_a2pg

Gauges = dict[tuple[str, str], float]
"""(metric name, its one label's value) to value."""


def gauges(text: str) -> Gauges:
    return {
        (sample.name, next(iter(sample.labels.values()), "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def expected(stats: list[ConsumerStats]) -> Gauges:
    return {
        (name, s.consumer): gauge_value(s, field)
        for s in stats
        for field, name, _help in CONSUMER_GAUGES
    }


async def _some_of_everything(store: Store) -> None:
    """For consumer ``w``: a dead-lettered lane head with an event behind it, a claimed head,
    and ready ones; consumer ``v``: one ready head."""
    await store.append("a", [work(1, lane="x"), work(2, lane="x")])
    [head] = await store.claim_any(holder="h", ttl=30, consumers=[Consumer("w")], limit=1)
    await store.fail_attempt(
        "a", consumer="w", lane="x", index=head.index, attempt=head.attempt, error="e",
        max_failures=1,
    )  # fmt: skip
    await store.append("b", [work(1), work(2), work(3)])
    await store.claim_any(holder="h", ttl=30, consumers=[Consumer("w")], limit=1)
    await store.append("c", [work(1, to="v")])


def _set_up(dsn: str) -> list[ConsumerStats]:
    async def go() -> list[ConsumerStats]:
        store = await PostgresStore.open(dsn)
        try:
            await _some_of_everything(store)
            return await store.consumer_stats()
        finally:
            await store.close()

    return asyncio.run(go())


def _a2pg(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), stdout=out)
    return code, out.getvalue()


def test_metrics_once_prints_the_store_gauges(postgres_dsn: str) -> None:
    stats = _set_up(postgres_dsn)
    by_name = {s.consumer: s for s in stats}
    assert (by_name["w"].dead_letters, by_name["w"].blocked_lanes, by_name["w"].claimed) == (
        1,
        1,
        1,
    )
    assert (by_name["w"].ready, by_name["v"].ready) == (2, 1)

    code, text = _a2pg("metrics", "--once", "--dsn", postgres_dsn)
    assert code == 0
    shown = gauges(text)
    for key, value in expected(stats).items():
        if key[0] not in AGES:  # they grow between the reads
            assert shown[key] == value, key
    assert shown[("a2pg_consumer_oldest_ready_age_seconds", "w")] >= 0
    assert shown[("a2pg_consumer_oldest_blocked_age_seconds", "w")] >= 0
    assert shown[("a2pg_consumer_oldest_blocked_age_seconds", "v")] == 0  # nothing blocked
    assert shown[("a2pg_store_up", "")] == 1
    assert (shown[("a2pg_workers", "live")], shown[("a2pg_workers", "stale")]) == (0, 0)


AGES = ("a2pg_consumer_oldest_ready_age_seconds", "a2pg_consumer_oldest_blocked_age_seconds")


def _beat(holder: str, *consumers: str) -> WorkerBeat:
    return WorkerBeat(
        holder=holder,
        host="box",
        pid=7,
        consumers=consumers,
        concurrency=2,
        started_at=datetime.now(UTC),
        in_flight=0,
        version="0.1.0",
        interval=600.0,
    )


def test_metrics_once_lists_every_served_paused_or_backfilling_consumer(
    postgres_dsn: str,
) -> None:
    """ghost: named by a live worker only, so its series exist at 0 (an alert on dead letters
    reads 0, not no data); v: paused; audit: a log consumer backfilling."""

    async def go() -> None:
        store = await PostgresStore.open(postgres_dsn)
        try:
            await _some_of_everything(store)
            await store.heartbeat(_beat("w-1", "ghost", "w"))
            await store.pause_consumers(["v"])
            await store.register_consumers([Consumer("audit", LogSpec(backfill=True))])
        finally:
            await store.close()

    asyncio.run(go())
    code, text = _a2pg("metrics", "--once", "--dsn", postgres_dsn)
    assert code == 0
    shown = gauges(text)
    for _field, name, _help in CONSUMER_GAUGES:
        assert {consumer for metric, consumer in shown if metric == name} == {
            "audit",
            "ghost",
            "v",
            "w",
        }, name
    ghost = {name: shown[(name, "ghost")] for _field, name, _help in CONSUMER_GAUGES}
    assert ghost == {name: 0.0 for name in ghost} | {"a2pg_consumer_live_workers": 1.0}
    assert shown[("a2pg_consumer_live_workers", "w")] == 1
    assert (shown[("a2pg_consumer_paused", "v")], shown[("a2pg_consumer_paused", "w")]) == (1, 0)
    assert shown[("a2pg_consumer_backfill_running", "audit")] == 1
    assert shown[("a2pg_consumer_backfill_sessions", "audit")] == 0
    assert shown[("a2pg_consumer_backfill_running", "w")] == 0
    assert shown[("a2pg_consumer_scheduled", "w")] == 0

    code, text = _a2pg("metrics", "--once", "--json", "--dsn", postgres_dsn)
    rows = {row["consumer"]: row for row in json.loads(text)["consumers"]}
    assert (rows["ghost"]["served_by"], rows["ghost"]["dead_letters"]) == (1, 0)
    assert rows["v"]["paused"] is True and rows["w"]["paused"] is False
    assert rows["w"]["oldest_blocked_age"] >= 0 and rows["v"]["oldest_blocked_age"] is None
    backfill = rows["audit"]["backfill"]
    assert (backfill["running"], backfill["sessions"], backfill["done_at"]) == (True, 0, None)
    assert rows["w"]["backfill"] is None


def test_metrics_once_json_gives_the_same_numbers(postgres_dsn: str) -> None:
    stats = _set_up(postgres_dsn)
    code, text = _a2pg("metrics", "--once", "--json", "--dsn", postgres_dsn)
    assert code == 0
    shown = json.loads(text)
    rows = {row["consumer"]: row for row in shown["consumers"]}
    for s in stats:
        for field in (
            "ready",
            "claimed",
            "backing_off",
            "scheduled",
            "dead_letters",
            "blocked_lanes",
            "blocked",
            "registered",
            "paused",
            "served_by",
        ):
            assert rows[s.consumer][field] == getattr(s, field)
    assert shown["workers"] == {"live": 0, "stale": 0}


def test_metrics_json_works_without_the_extra_and_text_names_it(postgres_dsn: str) -> None:
    code, err = run_a2pg("metrics", "--once", "--dsn", postgres_dsn, blocked=WITHOUT_EXTRAS)
    assert (code, err) == (
        2,
        "a2pg: error: a2pg metrics --once needs prometheus-client, which is not installed: "
        "pip install 'a2pg[metrics]'\n",
    )
    code, err = run_a2pg(
        "metrics", "--once", "--json", "--dsn", postgres_dsn, blocked=WITHOUT_EXTRAS
    )
    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "give --once (print the gauges) or --port PORT (serve them)"),
        (("--port", "0", "--json"), "--json goes with --once, not with --port"),
    ],
)
def test_metrics_usage_errors(cli: Cli, argv: tuple[str, ...], message: str) -> None:
    code, err = cli("metrics", "--dsn", "postgresql://postgres@127.0.0.1:1/x", *argv)
    assert (code, err) == (2, f"a2pg: error: {message}\n")


# ------------------------------------------------------------------- read on scrape


async def test_the_collector_reads_the_store_at_most_every_max_age(store: Store) -> None:
    await store.append("s", [work(1)])
    loop = asyncio.get_running_loop()
    collector = StoreCollector(store, loop, max_age=3600)

    def scrape() -> Gauges:
        return {
            (sample.name, sample.labels.get("consumer", "")): sample.value
            for family in collector.collect()
            for sample in family.samples
        }

    first = await asyncio.to_thread(scrape)
    assert first[("a2pg_consumer_ready", "w")] == 1
    await store.append("s", [work(2)])
    assert (await asyncio.to_thread(scrape))[("a2pg_consumer_ready", "w")] == 1  # cached
    assert collector.reads == 1

    fresh = StoreCollector(store, loop, max_age=0)
    assert await asyncio.to_thread(lambda: list(fresh.collect()))  # one read
    again = {
        (s.name, s.labels.get("consumer", "")): s.value
        for family in await asyncio.to_thread(lambda: list(fresh.collect()))
        for s in family.samples
    }
    assert again[("a2pg_consumer_ready", "w")] == 2 and fresh.reads == 2


async def test_the_collector_never_blocks_its_own_loop(store: Store) -> None:
    collector = StoreCollector(store, asyncio.get_running_loop())
    [up] = list(collector.collect())  # on the loop's thread: it cannot wait for the loop
    assert up.name == "a2pg_store_up" and up.samples[0].value == 0
    assert collector.reads == 0


# ------------------------------------------------------------------- served over HTTP


def scrape_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
        text: str = response.read().decode()
    return text


async def test_metrics_port_serves_fresh_store_gauges(
    postgres_dsn: str, postgres_store: Store
) -> None:
    await postgres_store.append("p", [work(1, to="echo")])
    argv = ("metrics", "--dsn", postgres_dsn, "--port", "0", "--host", "127.0.0.1")
    with WorkerProcess(*argv, "--max-age", "0") as served:
        url = (await served.wait_for(r"store metrics at (http://\S+/metrics)"))[1]
        first = gauges(await asyncio.to_thread(scrape_text, url))
        assert first[("a2pg_consumer_ready", "echo")] == 1
        await postgres_store.append("p", [work(2, to="echo")])

        async def two_ready() -> bool:
            shown = gauges(await asyncio.to_thread(scrape_text, url))
            return shown.get(("a2pg_consumer_ready", "echo")) == 2

        await eventually(two_ready)
        assert await served.stop() == 0, served.err


async def test_worker_metrics_store_adds_the_store_gauges(
    postgres_dsn: str, postgres_store: Store
) -> None:
    argv = (
        "worker",
        "tests.observability.sample_app:app",
        "--dsn",
        postgres_dsn,
        "--metrics-port",
        "0",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-store",
        "--max-failures",
        "1",
    )
    with WorkerProcess(*argv) as worker:
        url = (await worker.wait_for(r"metrics at (http://\S+/metrics)"))[1]
        await postgres_store.append(
            "q", [NewEvent("ping", {"kind": "poison"}, targets=[Target("echo", "l")])]
        )

        async def dead() -> bool:
            return len(await postgres_store.dead_letters("q")) == 1

        await eventually(dead)
        shown: Gauges = {}

        async def counted() -> bool:  # the worker counts once the store has answered
            nonlocal shown
            shown = gauges(await asyncio.to_thread(scrape_text, url))
            return shown.get(("a2pg_attempts_dead_lettered_total", "echo")) == 1

        await eventually(counted)
        assert shown[("a2pg_consumer_dead_letters", "echo")] == 1
        assert shown[("a2pg_consumer_blocked_lanes", "echo")] == 1
        assert shown[("a2pg_consumer_registered", "echo")] == 0  # a targeted consumer
        assert await worker.stop() == 0, worker.err


def test_metrics_store_needs_metrics_port(cli: Cli) -> None:
    code, err = cli(
        "worker", "tests.observability.sample_app:app", "--dsn", "postgresql://h/d",
        "--metrics-store",
    )  # fmt: skip
    assert (code, err) == (2, "a2pg: error: --metrics-store needs --metrics-port\n")
