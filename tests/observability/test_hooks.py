"""A worker takes several observers at once; anything else as ``hooks`` is refused."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from a2pg.observability.metrics import WorkerMetrics
from a2pg.observability.tracing import WorkerTracing
from a2pg.store import Store
from a2pg.worker import App, Worker, WorkerHooks

from ..worker.helpers import bounded, work


async def test_every_observer_given_sees_every_attempt(store: Store) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    metrics = WorkerMetrics()

    await store.append("s", [work(1), work(2)])
    worker = Worker(store, App({"w": lambda head: None}), hooks=[metrics, WorkerTracing(provider)])
    await bounded(worker.run_until_idle())

    started = metrics.registry.get_sample_value("a2pg_attempts_started_total", {"consumer": "w"})
    assert started == 2
    assert [s.name for s in exporter.get_finished_spans()].count("a2pg.attempt") == 2
    provider.shutdown()


@pytest.mark.parametrize("bad", [42, [WorkerHooks(), "metrics"]])
def test_hooks_that_are_not_worker_hooks_are_refused(bad: object) -> None:
    from a2pg.memory import MemoryStore

    with pytest.raises(TypeError, match="hooks must be WorkerHooks"):
        Worker(MemoryStore(), App({"w": lambda head: None}), hooks=bad)  # type: ignore[arg-type]
