"""App registration, returned-event ids, backoff math and Worker argument checks (no store I/O)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from a2pg import A2Error, Consumer, Dispatch, Head, LogSpec, NewEvent, StoredEvent
from a2pg.backoff import Backoff
from a2pg.worker import App, Worker
from a2pg.worker.app import completion_events, returned_event_id


def head(index: int = 3, attempt: int = 1, *, session: str = "s", lane: str | None = None) -> Head:
    event = StoredEvent("e", "job", None, index, session, datetime(2026, 1, 1, tzinfo=UTC))
    return Head(event, "w", lane, Dispatch(attempt_count=attempt))


def test_decorator_and_mapping_register_consumers() -> None:
    def plain(h: Head) -> None:
        return None

    app = App({"mailer": plain})

    @app.consumer("audit", log=LogSpec(types=("order.placed",)))
    async def audit(h: Head) -> None:
        return None

    assert app.consumers == [
        Consumer("mailer"),
        Consumer("audit", LogSpec(types=("order.placed",))),
    ]
    assert app.log_consumers == [Consumer("audit", LogSpec(types=("order.placed",)))]
    assert "audit" in app and len(app) == 2
    mailer, audited = app.registration("mailer"), app.registration("audit")
    assert mailer is not None and not mailer.is_async
    assert audited is not None and audited.is_async and audited.handler is audit


def test_async_callable_objects_are_async() -> None:
    class Handler:
        async def __call__(self, h: Head) -> None:
            return None

    app = App({"w": Handler()})
    registration = app.registration("w")
    assert registration is not None and registration.is_async


def test_a_consumer_has_one_handler() -> None:
    app = App({"w": lambda h: None})
    with pytest.raises(ValueError, match="already has a handler"):
        app.add("w", lambda h: None)


def test_bad_names_and_handlers_are_refused() -> None:
    app = App()
    with pytest.raises(A2Error) as raised:
        app.add("", lambda h: None)
    assert raised.value.code == "INVALID_ARGUMENT"
    with pytest.raises(TypeError):
        app.add("w", "not callable")  # type: ignore[arg-type]


def test_returned_ids_are_stable_per_attempt_and_position() -> None:
    first = returned_event_id(head(attempt=1), 0)
    assert first == returned_event_id(head(attempt=1), 0)
    others = {
        returned_event_id(head(attempt=2), 0),
        returned_event_id(head(attempt=1), 1),
        returned_event_id(head(index=4), 0),
        returned_event_id(head(session="t"), 0),
        returned_event_id(head(lane="x"), 0),
    }
    assert first not in others and len(others) == 5


def test_completion_events_keep_given_ids_and_fill_missing_ones() -> None:
    h = head()
    events = completion_events(h, [NewEvent("a", id="mine"), NewEvent("b")])
    assert [e.id for e in events] == ["mine", returned_event_id(h, 1)]
    assert completion_events(h, None) == []
    assert completion_events(h, NewEvent("one"))[0].id == returned_event_id(h, 0)


@pytest.mark.parametrize("result", ["text", {"type": "x"}, 42, [NewEvent("a"), "b"]])
def test_completion_events_refuse_anything_but_events(result: object) -> None:
    with pytest.raises(TypeError, match="expected"):
        completion_events(head(), result)


def test_backoff_doubles_up_to_its_cap() -> None:
    backoff = Backoff(base=2.0, cap=10.0, jitter=0.0)
    assert [backoff.delay(n) for n in range(1, 6)] == [2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff.delay(10_000) == 10.0


def test_backoff_jitter_stays_within_its_fraction() -> None:
    backoff = Backoff(base=4.0, cap=4.0, jitter=0.25, rng=random.Random(7))
    delays = [backoff.delay(1) for _ in range(200)]
    assert all(3.0 <= d <= 4.0 for d in delays)
    assert len(set(delays)) > 100


@pytest.mark.parametrize(
    "options",
    [{"base": 0.0}, {"base": 2.0, "cap": 1.0}, {"jitter": 1.5}, {"base": float("inf")}],
)
def test_backoff_refuses_nonsense(options: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**options)  # type: ignore[arg-type]


def test_worker_refuses_nonsense_settings() -> None:
    store: object = object()
    app = App({"w": lambda h: None})
    with pytest.raises(ValueError, match="no consumers"):
        Worker(store, App())  # type: ignore[arg-type]
    for options in ({"concurrency": 0}, {"ttl": 0}, {"max_failures": 0}, {"claim_batch": -1}):
        with pytest.raises(ValueError):
            Worker(store, app, **options)  # type: ignore[arg-type]
    worker = Worker(store, app, ttl=30.0, concurrency=4)  # type: ignore[arg-type]
    assert worker.renew_interval == 10.0
    assert worker.claim_batch == 4 and worker.flush_size == 4
    assert worker.holder.count(":") >= 2
