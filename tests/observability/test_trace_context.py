"""Traces that follow events: an append under a span is a producer span whose context the
events store, and the attempt of such an event joins that trace (a child, or a root
linked to it); an idle worker makes no spans. Exported by the SDK's in-memory exporter.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, StatusCode, TraceFlags, TraceState

from a2pg import A2Error, Head, NewEvent, Target
from a2pg.contract import propagation
from a2pg.observability.tracing import WorkerTracing
from a2pg.store import Store
from a2pg.worker import App, Worker
from a2pg.worker.hooks import WorkerHooks

from ..worker.helpers import bounded, until, work

CARRIED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    found = InMemorySpanExporter()
    yield found
    found.clear()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    """A provider of the test's own, also the appends' (the global one stays unset)."""
    made = TracerProvider()
    made.add_span_processor(SimpleSpanProcessor(exporter))
    propagation.use_tracer_provider(made)
    yield made
    propagation.use_tracer_provider(None)
    made.shutdown()


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def context_of(span: ReadableSpan) -> SpanContext:
    context = span.context
    assert isinstance(context, SpanContext)
    return context


def traceparent(context: SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


async def run_one(store: Store, tracing: WorkerTracing) -> None:
    async def handler(head: Head) -> None:
        pass

    await bounded(Worker(store, App({"w": handler}), hooks=tracing).run_until_idle())


async def test_an_append_under_a_span_is_a_producer_span_its_events_carry(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with provider.get_tracer("the-app").start_as_current_span("request") as request:
        result = await store.append("s", [work(1), work(2)])
        [one] = (await store.append("t", [work(3)])).events
    spans = exporter.get_finished_spans()
    first, second = named(spans, "a2pg.append")
    assert first.kind is SpanKind.PRODUCER
    assert first.parent is not None and first.parent.span_id == request.get_span_context().span_id
    assert dict(first.attributes or {}) == {
        "messaging.system": "a2pg",
        "messaging.operation.type": "send",
        "messaging.operation.name": "append",
        "messaging.destination.name": "s",
        "a2pg.session_id": "s",
        "messaging.batch.message_count": 2,
    }
    assert (second.attributes or {})["messaging.message.id"] == one.id
    stored = traceparent(context_of(first))
    assert [e.trace_parent for e in result.events] == [stored, stored]
    assert [e.trace_parent for e in await store.read("s")] == [stored, stored]
    assert one.trace_parent == traceparent(context_of(second))


async def test_the_attempt_is_a_child_of_the_append_in_the_requests_trace(
    store: Store,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    with provider.get_tracer("the-app").start_as_current_span("request") as request:
        [event] = (await store.append("s", [work(1, lane="turns")])).events
    await run_one(store, WorkerTracing(provider))

    spans = exporter.get_finished_spans()
    [append] = named(spans, "a2pg.append")
    [attempt] = named(spans, "a2pg.attempt")
    assert attempt.kind is SpanKind.CONSUMER
    assert attempt.parent is not None and attempt.parent.span_id == context_of(append).span_id
    assert context_of(attempt).trace_id == request.get_span_context().trace_id
    attributes = dict(attempt.attributes or {})
    assert {k: v for k, v in attributes.items() if k.startswith("messaging.")} == {
        "messaging.system": "a2pg",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "s",
        "messaging.consumer.group.name": "w",
        "messaging.message.id": event.id,
    }
    assert (attributes["a2pg.lane"], attributes["a2pg.index"], attributes["a2pg.attempt"]) == (
        "turns",
        1,
        1,
    )


async def test_an_attempts_returned_events_carry_it_to_the_next_attempt(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A handler's returned event stores its attempt span's context: the next consumer's
    attempt is that attempt's child, in the request's trace."""
    app = App()

    @app.consumer("first")
    async def first(head: Head) -> NewEvent:
        return NewEvent("next", targets=(Target("second"),))

    @app.consumer("second")
    async def second(head: Head) -> None:
        return None

    with provider.get_tracer("the-app").start_as_current_span("request") as request:
        await store.append("s", [work(1, to="first")])
    await bounded(Worker(store, app, hooks=WorkerTracing(provider)).run_until_idle())

    attempts = {
        (span.attributes or {})["a2pg.consumer"]: span
        for span in named(exporter.get_finished_spans(), "a2pg.attempt")
    }
    caused, follow = attempts["first"], attempts["second"]
    assert follow.parent is not None and follow.parent.span_id == context_of(caused).span_id
    assert context_of(follow).trace_id == request.get_span_context().trace_id
    returned = (await store.read("s"))[1]
    assert returned.trace_parent == traceparent(context_of(caused))


async def test_follow_link_makes_the_attempt_a_root_linked_to_the_append(
    store: Store,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    with provider.get_tracer("the-app").start_as_current_span("request"):
        await store.append("s", [work(1)])
    await run_one(store, WorkerTracing(provider, follow="link"))

    spans = exporter.get_finished_spans()
    [append] = named(spans, "a2pg.append")
    [attempt] = named(spans, "a2pg.attempt")
    assert attempt.parent is None
    [link] = attempt.links
    assert link.context.span_id == context_of(append).span_id
    assert link.context.trace_id == context_of(append).trace_id != context_of(attempt).trace_id


async def test_a_tracestate_reaches_the_attempt(
    store: Store,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    remote = SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("congo", "t61rcWkgMzE")]),
    )
    incoming = trace.set_span_in_context(trace.NonRecordingSpan(remote))
    with provider.get_tracer("the-app").start_as_current_span("request", context=incoming):
        [event] = (await store.append("s", [work(1)])).events
    assert event.trace_parent is not None and event.trace_parent.endswith(" congo=t61rcWkgMzE")
    await run_one(store, WorkerTracing(provider))
    [attempt] = named(exporter.get_finished_spans(), "a2pg.attempt")
    assert context_of(attempt).trace_id == remote.trace_id
    assert context_of(attempt).trace_state.get("congo") == "t61rcWkgMzE"


async def test_a_carried_context_is_the_attempts_parent_without_an_append_span(
    store: Store,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    with propagation.carry(CARRIED):
        await store.append("s", [work(1)])
    await run_one(store, WorkerTracing(provider))
    spans = exporter.get_finished_spans()
    assert named(spans, "a2pg.append") == []
    [attempt] = named(spans, "a2pg.attempt")
    assert attempt.parent is not None
    assert traceparent(attempt.parent) == CARRIED


async def test_without_a_current_span_an_append_makes_no_span_and_stores_none(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    [event] = (await store.append("s", [work(1)])).events
    assert event.trace_parent is None
    await run_one(store, WorkerTracing(provider))
    spans = exporter.get_finished_spans()
    assert named(spans, "a2pg.append") == []
    [attempt] = named(spans, "a2pg.attempt")
    assert attempt.parent is None


async def test_a_refused_append_is_an_error_span_and_writes_nothing(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with (
        provider.get_tracer("the-app").start_as_current_span("request"),
        pytest.raises(A2Error),
    ):
        await store.append("s", [NewEvent("a2.cleared")])
    [append] = named(exporter.get_finished_spans(), "a2pg.append")
    assert append.status.status_code is StatusCode.ERROR
    assert await store.read("s") == []


class Polls(WorkerHooks):
    def __init__(self) -> None:
        self.polls = 0

    def poll(self) -> None:
        self.polls += 1


async def test_an_idle_worker_makes_no_spans_until_there_is_work(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    done: list[int] = []

    async def handler(head: Head) -> None:
        done.append(head.index)

    polls = Polls()
    hooks = [WorkerTracing(provider), polls]
    app = App({"w": handler})
    async with Worker(store, app, hooks=hooks, poll_interval=0.02, heartbeat_interval=0.02):
        await until(lambda: polls.polls >= 5)
        assert exporter.get_finished_spans() == ()
        await store.append("s", [NewEvent("job", targets=[Target("w")])])
        await until(lambda: done == [1])
        await until(lambda: polls.polls >= 10)
    names = [span.name for span in exporter.get_finished_spans()]
    assert "a2pg.attempt" in names
    claims = [
        span
        for span in exporter.get_finished_spans()
        if span.name in ("a2pg.store.claim_any", "a2pg.store.complete_and_claim")
    ]
    assert claims, names  # the claim that found the job is a span, the empty ones none
    for span in claims:
        if span.name == "a2pg.store.claim_any":
            assert (span.attributes or {})["messaging.batch.message_count"] == 1
    assert not {"a2pg.store.next_due_in", "a2pg.store.heartbeat"} & set(names)
