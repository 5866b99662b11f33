"""OpenTelemetry spans for a worker: one per attempt, joined to the trace of the append
that caused it, and one per store call that does work.

Only ``opentelemetry-api`` is used: with no SDK configured every span is a no-op, and
an application that installs a ``TracerProvider`` (globally, or given here) gets them
exported. The handler runs inside its attempt's span, so its own spans (and the store
calls it makes through instrumented code) nest under ``a2pg.attempt``. Importing this
module without ``opentelemetry-api`` raises ``MissingExtra``.

An append made under a span stores its producer span's context with each event
(``a2pg.contract.propagation``, ``StoredEvent.trace_parent``). The attempt span of that
event is a child of it (``follow="parent"``, the default: one attempt processes one
event, the case where the messaging conventions let the creation context be the
parent), so the request, its append and every attempt of every consumer it started are
one trace; ``follow="link"`` makes each attempt the root of a trace of its own, linked
to the append (for traces that must stay short when work runs hours after the request).

An idle worker makes no spans: its polls (``claim_any``, ``next_due_in``, heartbeats)
are spans only when they fail or, for a claim, when it claimed something (the span is
then made with the claim's own start and end once the heads are counted).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Literal

from .. import __version__
from ..contract import propagation
from ..worker.hooks import Outcome, WorkerHooks
from .extras import MissingExtra, available

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import (
        Link,
        ProxyTracerProvider,
        SpanKind,
        Status,
        StatusCode,
        TracerProvider,
    )
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise MissingExtra("otel", "a2pg tracing") from exc

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

    from ..worker.attempt import Attempt

TRACER_NAME = propagation.TRACER_NAME
ATTEMPT_SPAN = "a2pg.attempt"
APPEND_SPAN = propagation.APPEND_SPAN
STORE_SPAN_PREFIX = "a2pg.store."

FAILED: frozenset[Outcome] = frozenset({"failed", "dead_lettered", "abandoned"})
"""Outcomes whose span gets status ERROR."""

POLLS = frozenset({"claim_any", "next_due_in", "heartbeat", "forget_workers"})
"""The store calls an idle worker repeats: outside a span they make one only when they
fail, or (``claim_any``) when they claimed something."""

Follow = Literal["parent", "link"]

_PROPAGATOR = TraceContextTextMapPropagator()

_claim: ContextVar[tuple[str, int, int] | None] = ContextVar("a2pg_untraced_claim", default=None)
"""The last root claim of this task (op, start and end in ns), until ``claimed`` counts it."""


def origin(trace_parent: str | None) -> Context | None:
    """The context a stored ``trace_parent`` names (a remote parent), or None when there is
    none or it does not parse (an event stored by another tool)."""
    if trace_parent is None:
        return None
    traceparent, tracestate = propagation.split(trace_parent)
    carrier = {"traceparent": traceparent}
    if tracestate is not None:
        carrier["tracestate"] = tracestate
    context = _PROPAGATOR.extract(carrier)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


class WorkerTracing(WorkerHooks):
    """Spans ``a2pg.attempt`` (kind CONSUMER; attributes ``a2pg.session_id``,
    ``a2pg.consumer``, ``a2pg.lane`` when there is one, ``a2pg.index``, ``a2pg.attempt``,
    ``a2pg.event_type`` and the messaging conventions' ``messaging.system`` ``a2pg``,
    ``messaging.operation.type`` ``process``, ``messaging.destination.name`` (the session),
    ``messaging.consumer.group.name`` (the consumer), ``messaging.message.id`` (the event
    id); at the end ``a2pg.outcome``; status ERROR with the exception recorded when it
    failed) and ``a2pg.store.<op>`` (kind CLIENT) around each store call the worker
    makes that does work (see the module docstring for the idle ones).

    ``follow``: an attempt's span is a child of the context its event was appended under
    (``"parent"``) or a root linked to it (``"link"``); an event stored without one gives
    a root either way.

    ``tracer_provider`` defaults to the global one (``trace.set_tracer_provider``). Until
    one is set the hooks return at once: no-op spans would cost a busy worker a few
    percent of a core for nothing.
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, follow: Follow = "parent"
    ) -> None:
        if follow not in ("parent", "link"):
            raise ValueError(f"follow must be 'parent' or 'link', not {follow!r}")
        self._given = tracer_provider is not None
        self._follow = follow
        self._tracer = trace.get_tracer(TRACER_NAME, __version__, tracer_provider=tracer_provider)

    def _configured(self) -> bool:
        return self._given or not isinstance(trace.get_tracer_provider(), ProxyTracerProvider)

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        if not self._configured():
            yield
            return
        head = attempt.head
        event = head.event
        attributes: dict[str, str | int] = {
            "a2pg.session_id": head.session_id,
            "a2pg.consumer": head.consumer,
            "a2pg.index": head.index,
            "a2pg.attempt": head.attempt,
            "a2pg.event_type": event.type,
            "messaging.system": propagation.MESSAGING_SYSTEM,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": head.session_id,
            "messaging.consumer.group.name": head.consumer,
            "messaging.message.id": event.id,
        }
        if head.lane is not None:
            attributes["a2pg.lane"] = head.lane
        appended = origin(event.trace_parent)
        parent: Context | None = None
        links: Sequence[Link] = ()
        if appended is not None:
            if self._follow == "parent":
                parent = appended
            else:
                parent = Context()  # a root, whatever the worker's context holds
                links = [Link(trace.get_current_span(appended).get_span_context())]
        with self._tracer.start_as_current_span(
            ATTEMPT_SPAN,
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield
            finally:
                outcome: Outcome = attempt.outcome or "abandoned"
                span.set_attribute("a2pg.outcome", outcome)
                if outcome in FAILED:
                    error = attempt.error
                    if error is not None:
                        span.record_exception(error)
                    description = f"{outcome}: {error!r}" if error is not None else outcome
                    span.set_status(Status(StatusCode.ERROR, description))

    def watches_attempts(self) -> bool:
        return self._configured()

    def watches_store_calls(self) -> bool:
        return self._configured()

    @contextlib.contextmanager
    def store_call(self, op: str) -> Iterator[None]:
        if not self._configured():
            yield
            return
        _claim.set(None)
        if op in POLLS and not trace.get_current_span().get_span_context().is_valid:
            started = time.time_ns()
            try:
                yield
            except Exception as error:
                self._store_span(op, started, time.time_ns(), error=error)
                raise
            if op == "claim_any":
                _claim.set((op, started, time.time_ns()))
            return
        with self._tracer.start_as_current_span(
            STORE_SPAN_PREFIX + op,
            kind=SpanKind.CLIENT,
            attributes={"a2pg.store.op": op},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield
            except Exception as error:
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, repr(error)))
                raise

    def claimed(self, heads: int, limit: int) -> None:
        """A root claim's span, now that it is known to have claimed something."""
        pending = _claim.get()
        if pending is None:
            return
        _claim.set(None)
        op, started, ended = pending
        if heads > 0:
            self._store_span(op, started, ended, heads=heads)

    def _store_span(
        self,
        op: str,
        started: int,
        ended: int,
        *,
        heads: int | None = None,
        error: Exception | None = None,
    ) -> None:
        """A poll's span, made after it ran (a root: no span was current)."""
        attributes: dict[str, str | int] = {"a2pg.store.op": op}
        if heads is not None:
            attributes["messaging.system"] = propagation.MESSAGING_SYSTEM
            attributes["messaging.operation.type"] = "receive"
            attributes["messaging.operation.name"] = op
            attributes["messaging.batch.message_count"] = heads
        span = self._tracer.start_span(
            STORE_SPAN_PREFIX + op,
            context=Context(),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=started,
            record_exception=False,
            set_status_on_exception=False,
        )
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, repr(error)))
        span.end(end_time=ended)


# -- exporting (``a2pg worker --otel-exporter``) -----------------------------------------

OTLP_MODULES = {
    "http/protobuf": "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "grpc": "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
}
"""The OTLP span exporters by protocol (``OTEL_EXPORTER_OTLP_PROTOCOL``), preferred first."""

SERVICE_NAME = "a2pg-worker"
"""The ``service.name`` of a worker's spans unless ``OTEL_SERVICE_NAME`` (or
``OTEL_RESOURCE_ATTRIBUTES``) names one."""


def otlp_module() -> str | None:
    """The OTLP exporter module to use: the protocol's that ``OTEL_EXPORTER_OTLP_TRACES_
    PROTOCOL`` or ``OTEL_EXPORTER_OTLP_PROTOCOL`` names, else the first installed; None
    when it is not installed."""
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL"
    )
    wanted = [OTLP_MODULES[protocol]] if protocol in OTLP_MODULES else list(OTLP_MODULES.values())
    return next((module for module in wanted if available(module)), None)


def exporting_provider(exporter: Literal["console", "otlp"]) -> SdkTracerProvider:
    """An SDK ``TracerProvider`` exporting to stdout (``console``, each span as it ends) or
    over OTLP (``otlp``, in batches; endpoint and headers from the ``OTEL_EXPORTER_OTLP_*``
    variables). Needs ``opentelemetry-sdk``, and an OTLP exporter for ``otlp``
    (``MissingExtra``-like ``ImportError`` naming the install otherwise)."""
    try:
        from opentelemetry.sdk import trace as sdk
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanProcessor
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
            SpanExporter,
        )
    except ImportError as exc:
        raise ImportError(
            "--otel-exporter needs opentelemetry-sdk, which is not installed: "
            "pip install opentelemetry-sdk"
        ) from exc
    processor: SpanProcessor
    if exporter == "console":
        processor = SimpleSpanProcessor(ConsoleSpanExporter())
    else:
        module = otlp_module()
        if module is None:
            raise ImportError(
                "--otel-exporter otlp needs an OTLP exporter, which is not installed: "
                "pip install opentelemetry-exporter-otlp"
            )
        made: SpanExporter = importlib.import_module(module).OTLPSpanExporter()
        processor = BatchSpanProcessor(made)
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    provider = sdk.TracerProvider(resource=resource)
    provider.add_span_processor(processor)
    return provider
