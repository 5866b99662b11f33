"""OpenTelemetry spans for a worker: one per attempt, one per store call.

Only ``opentelemetry-api`` is used: with no SDK configured every span is a no-op, and
an application that installs a ``TracerProvider`` (globally, or given here) gets them
exported. The handler runs inside its attempt's span, so its own spans (and the store
calls it makes through instrumented code) nest under ``a2pg.attempt``. Importing this
module without ``opentelemetry-api`` raises ``MissingExtra``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .. import __version__
from ..worker.hooks import Outcome, WorkerHooks
from .extras import MissingExtra

try:
    from opentelemetry import trace
    from opentelemetry.trace import (
        ProxyTracerProvider,
        SpanKind,
        Status,
        StatusCode,
        TracerProvider,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise MissingExtra("otel", "a2pg tracing") from exc

if TYPE_CHECKING:
    from ..worker.attempt import Attempt

TRACER_NAME = "a2pg"
ATTEMPT_SPAN = "a2pg.attempt"
STORE_SPAN_PREFIX = "a2pg.store."

FAILED: frozenset[Outcome] = frozenset({"failed", "dead_lettered", "abandoned"})
"""Outcomes whose span gets status ERROR."""


class WorkerTracing(WorkerHooks):
    """Spans ``a2pg.attempt`` (attributes ``a2pg.session_id``, ``a2pg.consumer``,
    ``a2pg.lane`` when there is one, ``a2pg.index``, ``a2pg.attempt``, and at the end
    ``a2pg.outcome``; status ERROR with the exception recorded when it failed) and
    ``a2pg.store.<op>`` around each store call the worker makes.

    ``tracer_provider`` defaults to the global one (``trace.set_tracer_provider``). Until
    one is set the hooks return at once: no-op spans would cost a busy worker a few
    percent of a core for nothing.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._given = tracer_provider is not None
        self._tracer = trace.get_tracer(TRACER_NAME, __version__, tracer_provider=tracer_provider)

    def _configured(self) -> bool:
        return self._given or not isinstance(trace.get_tracer_provider(), ProxyTracerProvider)

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        if not self._configured():
            yield
            return
        head = attempt.head
        attributes: dict[str, str | int] = {
            "a2pg.session_id": head.session_id,
            "a2pg.consumer": head.consumer,
            "a2pg.index": head.index,
            "a2pg.attempt": head.attempt,
            "a2pg.event_type": head.event.type,
        }
        if head.lane is not None:
            attributes["a2pg.lane"] = head.lane
        with self._tracer.start_as_current_span(
            ATTEMPT_SPAN,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
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
