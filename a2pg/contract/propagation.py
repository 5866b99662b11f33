"""The W3C trace context an append stores with its events, and the producer span it opens.

An append made while an OpenTelemetry span is current stores that context with each of
its events (``a2_events.trace_parent``, ``StoredEvent.trace_parent``: never in the
payload), so the worker's attempt span can join the trace of the request that caused
the work (``a2pg.observability.tracing``). The front (``CheckedStore.append``) wraps the
append in a producer span, ``a2pg.append``, and stores that span's context.

OpenTelemetry is an optional extra, and this module never imports it: it looks for
``opentelemetry.trace`` in ``sys.modules``. An application that traces has imported it
already; one that does not pays a dictionary lookup per append and nothing per event.

The stored text is the ``traceparent`` header (version ``00``), then, when the span
carries one, a space and the ``tracestate`` header: ``split`` takes it apart. A caller
relaying a context without OpenTelemetry (a ``traceparent`` header received, a test)
gives it with ``carry``; the append's check refuses a malformed one
(``INVALID_ARGUMENT``, nothing written).

This sits in the contract layer, not in ``a2pg.observability``, because the front uses
it and the front may import nothing above its own layer (``tests/test_layers.py``).
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

from ..errors import invalid
from .render import show, type_name

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from ..models import AppendResult

TRACER_NAME = "a2pg"
APPEND_SPAN = "a2pg.append"
MESSAGING_SYSTEM = "a2pg"

TRACEPARENT_LENGTH = 55
MAX_TRACESTATE_LENGTH = 512
"""The longest ``tracestate`` kept (W3C: a vendor may cut one longer, member by member)."""
MAX_TRACESTATE_MEMBERS = 32

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
_MEMBER = re.compile(
    r"[ \t]*(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e][ \t]*"
)
Published = Callable[[str, "AppendResult"], "AppendResult"]
"""Records an append's (checked) session and stored events on its span; returns the result."""

_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16

_carried: ContextVar[str | None] = ContextVar("a2pg_carried_trace_parent", default=None)
_tracer_provider: TracerProvider | None = None
_tracer: Tracer | None = None
"""The appends' tracer, made once per provider (the global one's resolves when it is set)."""


# -- the stored text ------------------------------------------------------------------


def join(traceparent: str, tracestate: str | None = None) -> str:
    """The stored text of a context: ``traceparent``, then `` tracestate`` when there is one."""
    return f"{traceparent} {tracestate}" if tracestate else traceparent


def split(text: str) -> tuple[str, str | None]:
    """A stored text's ``(traceparent, tracestate)``; the state None when it has none."""
    return text[:TRACEPARENT_LENGTH], text[TRACEPARENT_LENGTH + 1 :] or None


def check_trace_parent(value: object) -> str | None:
    """An append's trace context: None, or a text ``join`` makes of a valid ``traceparent``
    (version ``00``, lower-case hex, trace and span ids not all zeros) and an optional
    ``tracestate`` (at most 32 ``key=value`` members, 512 characters)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(f"trace_parent must be a str, not {type_name(value)}")
    if len(value) > TRACEPARENT_LENGTH + 1 + MAX_TRACESTATE_LENGTH:
        raise invalid(
            f"trace_parent is {len(value)} long, over the limit of "
            f"{TRACEPARENT_LENGTH + 1 + MAX_TRACESTATE_LENGTH} (a traceparent and a tracestate "
            f"of at most {MAX_TRACESTATE_LENGTH})"
        )
    traceparent, tracestate = split(value)
    found = _TRACEPARENT.fullmatch(traceparent)
    if found is None or found[1] == _ZERO_TRACE or found[2] == _ZERO_SPAN:
        raise invalid(
            f"trace_parent must start with a W3C traceparent "
            f"(00-<32 hex>-<16 hex>-<2 hex>, ids not all zeros), got {show(traceparent)}"
        )
    if len(value) > TRACEPARENT_LENGTH and (value[TRACEPARENT_LENGTH] != " " or not tracestate):
        raise invalid("trace_parent must be a traceparent, then a space and a tracestate")
    if tracestate is not None:
        members = tracestate.split(",")
        if len(members) > MAX_TRACESTATE_MEMBERS or not all(
            not member.strip(" \t") or _MEMBER.fullmatch(member) for member in members
        ):
            raise invalid(
                f"trace_parent's tracestate must be at most {MAX_TRACESTATE_MEMBERS} W3C "
                f"key=value members, got {show(tracestate)}"
            )
    return value


# -- where an append's context comes from --------------------------------------------


@contextlib.contextmanager
def carry(traceparent: str, tracestate: str | None = None) -> Iterator[None]:
    """Appends inside the block store this context (checked by the append:
    ``INVALID_ARGUMENT`` if malformed) rather than the current span's, and open no span:
    for a caller that relays W3C headers without OpenTelemetry, and for tests."""
    token = _carried.set(join(traceparent, tracestate))
    try:
        yield
    finally:
        _carried.reset(token)


def use_tracer_provider(provider: TracerProvider | None) -> None:
    """The provider of the ``a2pg.append`` spans from now on (None: the global one, as
    ``trace.set_tracer_provider`` sets it)."""
    global _tracer_provider, _tracer
    _tracer_provider, _tracer = provider, None


def current() -> str | None:
    """The context an append made now stores: the carried one, else the current span's
    when OpenTelemetry is loaded and a span is current (recording, or sampled out: the
    decision travels with it); else None."""
    carried = _carried.get()
    if carried is not None:
        return carried
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    state = context.trace_state.to_header() if context.trace_state else None
    parent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    return join(parent, state)


def append_span() -> contextlib.AbstractContextManager[Published] | None:
    """The producer span of an append, or None (the hot path: nothing to do) when no span
    is current, OpenTelemetry is not loaded, or the caller carries a context. Inside it,
    ``current()`` is the new span's context; the function it yields records the session
    once checked (``messaging.destination.name``) and the stored ids
    (``messaging.message.id`` for one event, ``messaging.batch.message_count``)."""
    if _carried.get() is not None or "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    if not trace.get_current_span().get_span_context().is_valid:
        return None
    return _producer()


@contextlib.contextmanager
def _producer() -> Iterator[Published]:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode

    global _tracer
    tracer = _tracer
    if tracer is None:
        tracer = _tracer = trace.get_tracer(TRACER_NAME, tracer_provider=_tracer_provider)
    attributes = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "append",
    }
    with tracer.start_as_current_span(
        APPEND_SPAN,
        kind=SpanKind.PRODUCER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield lambda session_id, result: _published(span, session_id, result)
        except Exception as error:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, repr(error)))
            raise


def _published(span: Span, session_id: str, result: AppendResult) -> AppendResult:
    span.set_attribute("messaging.destination.name", session_id)
    span.set_attribute("a2pg.session_id", session_id)
    events = result.events
    if len(events) == 1:
        span.set_attribute("messaging.message.id", events[0].id)
    else:
        span.set_attribute("messaging.batch.message_count", len(events))
    return result
