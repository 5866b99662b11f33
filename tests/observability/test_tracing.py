"""Worker spans, exported by the OpenTelemetry SDK's in-memory exporter: one per attempt (the
handler's own spans inside it), one per store call; none recorded when nothing is set up."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from a2pg import Head, NewEvent
from a2pg.observability.tracing import WorkerTracing
from a2pg.store import Store
from a2pg.worker import App, Worker

from ..worker.helpers import bounded, work


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    found = InMemorySpanExporter()
    yield found
    found.clear()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    """A provider of the test's own: the global one stays unset (the no-op)."""
    made = TracerProvider()
    made.add_span_processor(SimpleSpanProcessor(exporter))
    yield made
    made.shutdown()


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


async def test_each_attempt_is_a_span_and_the_handlers_spans_nest_in_it(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    handler_tracer = provider.get_tracer("the-app")
    app = App()

    @app.consumer("async")
    async def in_loop(head: Head) -> list[NewEvent]:
        with handler_tracer.start_as_current_span("handler.async"):
            return [NewEvent("done")]

    @app.consumer("sync")
    def in_thread(head: Head) -> None:  # runs in the thread pool, in a copy of the context
        with handler_tracer.start_as_current_span("handler.sync"):
            pass

    await store.append("s", [work(1, to="async", lane="turns"), work(2, to="sync")])
    await bounded(Worker(store, app, hooks=WorkerTracing(provider)).run_until_idle())

    spans = exporter.get_finished_spans()
    attempts = {
        (span.attributes or {})["a2pg.consumer"]: span for span in named(spans, "a2pg.attempt")
    }
    assert set(attempts) == {"async", "sync"}
    async_event_id = (await store.read("s"))[0].id
    assert dict(attempts["async"].attributes or {}) == {
        "a2pg.session_id": "s",
        "a2pg.consumer": "async",
        "a2pg.lane": "turns",
        "a2pg.index": 1,
        "a2pg.attempt": 1,
        "a2pg.event_type": "job",
        "a2pg.outcome": "completed",
        "messaging.system": "a2pg",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "s",
        "messaging.consumer.group.name": "async",
        "messaging.message.id": async_event_id,
    }
    assert "a2pg.lane" not in (attempts["sync"].attributes or {})
    for consumer, attempt in attempts.items():
        assert attempt.status.status_code is StatusCode.UNSET
        [inner] = named(spans, f"handler.{consumer}")
        assert inner.parent is not None and attempt.context is not None
        assert inner.parent.span_id == attempt.context.span_id
        assert inner.context is not None and inner.context.trace_id == attempt.context.trace_id

    store_spans = {span.name for span in spans if span.name.startswith("a2pg.store.")}
    assert store_spans & {"a2pg.store.claim_any", "a2pg.store.complete_and_claim"}
    assert store_spans & {"a2pg.store.complete_attempts", "a2pg.store.complete_and_claim"}


async def test_a_failed_attempt_has_status_error_and_its_store_call_nests_in_it(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async def broken(head: Head) -> None:
        raise ValueError("no good")

    await store.append("s", [work(1)])
    worker = Worker(store, App({"w": broken}), hooks=WorkerTracing(provider), max_failures=2)
    await bounded(worker.run_until_idle())

    spans = exporter.get_finished_spans()
    [attempt] = named(spans, "a2pg.attempt")
    assert attempt.status.status_code is StatusCode.ERROR
    assert "no good" in (attempt.status.description or "")
    assert (attempt.attributes or {})["a2pg.outcome"] == "failed"
    [event] = [e for e in attempt.events if e.name == "exception"]
    assert (event.attributes or {})["exception.type"] == "ValueError"
    [fail] = named(spans, "a2pg.store.fail_attempt")
    assert fail.parent is not None and attempt.context is not None
    assert fail.parent.span_id == attempt.context.span_id
    assert fail.status.status_code is StatusCode.UNSET


def test_a_failing_store_call_is_an_error_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracing = WorkerTracing(provider)
    with pytest.raises(ConnectionError), tracing.store_call("claim_any"):
        raise ConnectionError("database gone")
    [span] = exporter.get_finished_spans()
    assert span.name == "a2pg.store.claim_any"
    assert span.status.status_code is StatusCode.ERROR


async def test_without_a_configured_sdk_the_spans_are_no_ops(store: Store) -> None:
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)  # nothing set globally
    seen: list[bool] = []

    async def handler(head: Head) -> None:
        seen.append(trace.get_current_span().is_recording())

    await store.append("s", [work(1)])
    worker = Worker(store, App({"w": handler}), hooks=WorkerTracing())
    await bounded(worker.run_until_idle())
    assert worker.stats.completed == 1
    assert seen == [False]  # the attempt's span is there, and records nothing
