"""WorkerSettings: defaults, derived knobs, one check per knob; the Worker reads them from it."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from a2pg import AttemptRef, Head, NewEvent, Target
from a2pg.backoff import Backoff
from a2pg.contract import DEFAULT_LIMITS, Limits
from a2pg.memory import MemoryStore
from a2pg.models import RenewResult
from a2pg.worker import App, Worker, WorkerSettings

TIMEOUT = 10.0


def test_defaults_and_derived_knobs() -> None:
    settings = WorkerSettings()
    assert (settings.concurrency, settings.ttl, settings.max_failures) == (64, 30.0, 5)
    assert (settings.flush_interval, settings.poll_interval) == (0.005, 1.0)
    assert (settings.shutdown_grace, settings.cleanup_timeout) == (30.0, 10.0)
    assert settings.heartbeat_interval == 10.0
    assert settings.backoff == Backoff()
    assert (settings.claim_batch, settings.flush_size, settings.renew_interval) == (64, 64, 10.0)
    host, pid, suffix = settings.holder.rsplit(":", 2)
    assert host and pid.isdigit() and len(suffix) == 8
    assert WorkerSettings().holder != settings.holder  # unique per worker

    wide = WorkerSettings(concurrency=300, ttl=9.0)
    assert (wide.claim_batch, wide.flush_size, wide.renew_interval) == (300, 256, 3.0)


def test_given_knobs_are_kept_and_seconds_become_floats() -> None:
    backoff = Backoff(base=2.0, cap=8.0)
    settings = WorkerSettings(
        concurrency=4,
        claim_batch=7,
        flush_size=3,
        renew_interval=2,
        ttl=12,
        holder="h1",
        backoff=backoff,
    )
    assert (settings.claim_batch, settings.flush_size, settings.holder) == (7, 3, "h1")
    assert settings.backoff is backoff
    assert settings.renew_interval == 2.0 and isinstance(settings.renew_interval, float)
    assert settings.ttl == 12.0 and isinstance(settings.ttl, float)


def test_derived_knobs_are_resolved_once() -> None:
    """``replace()`` keeps what was resolved: the settings hold values, not formulas."""
    settings = WorkerSettings(concurrency=4)
    assert dataclasses.replace(settings, concurrency=8).claim_batch == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.concurrency = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("knob", "value"),
    [
        ("concurrency", 0),
        ("concurrency", True),
        ("concurrency", 2.0),
        ("claim_batch", -1),
        ("max_failures", 0),
        ("flush_size", 0),
        ("ttl", 0),
        ("ttl", math.nan),
        ("ttl", 3e11),
        ("ttl", 10**400),
        ("max_failures", 2**31),
        ("claim_batch", 10_001),
        ("concurrency", 10**6),
        ("flush_interval", -1.0),
        ("poll_interval", "1"),
        ("shutdown_grace", 0),
        ("renew_interval", 0.0),
        ("cleanup_timeout", -0.5),
        ("poll_interval", math.inf),
        ("heartbeat_interval", 0),
        ("heartbeat_interval", -2.0),
        ("heartbeat_interval", math.nan),
        ("heartbeat_interval", "10"),
        ("holder", 7),
        ("backoff", 1.0),
    ],
)
def test_each_bad_knob_is_refused_by_name(knob: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"^{knob} must be .*, got {value!r}$"):
        WorkerSettings(**{knob: value})  # type: ignore[arg-type]


def test_every_knob_has_help() -> None:
    for spec in dataclasses.fields(WorkerSettings):
        text = spec.metadata.get("help")
        assert isinstance(text, str) and text and "\n" not in text, spec.name


def test_the_worker_takes_knobs_or_settings_and_reads_them_from_its_settings() -> None:
    store = MemoryStore()
    app = App({"w": lambda head: None})
    worker = Worker(store, app, concurrency=4, ttl=9.0)
    assert worker.settings == WorkerSettings(concurrency=4, ttl=9.0, holder=worker.holder)
    for spec in dataclasses.fields(WorkerSettings):
        assert getattr(worker, spec.name) == getattr(worker.settings, spec.name), spec.name

    settings = WorkerSettings(concurrency=2, holder="mine")
    assert Worker(store, app, settings).settings is settings
    with pytest.raises(TypeError, match="not both"):
        Worker(store, app, settings, concurrency=3)
    with pytest.raises(TypeError, match="concurency"):
        Worker(store, app, concurency=3)
    with pytest.raises(ValueError, match="flush_size must be an int from 1 to 10000"):
        Worker(store, app, flush_size=0)


PAST_THE_STORE = 400_000_000.0
"""12.7 years: within the settings' own bound (a century), past the store's default one."""


@pytest.mark.parametrize(
    ("knobs", "what"),
    [
        ({"ttl": PAST_THE_STORE}, "ttl"),
        ({"heartbeat_interval": PAST_THE_STORE}, "heartbeat_interval"),
        ({"backoff": Backoff(cap=PAST_THE_STORE)}, "Backoff.cap"),
    ],
    ids=["ttl", "heartbeat_interval", "retry-cap"],
)
def test_a_duration_the_store_refuses_is_refused_when_the_worker_is_made(
    knobs: dict[str, Any], what: str
) -> None:
    """Such a worker once started, then had every claim (or beat, or failure) refused: at
    the default log level, it did nothing and said nothing."""
    WorkerSettings(**knobs)  # a century is the settings' own bound: they take it
    app = App({"w": lambda head: None})
    longest = DEFAULT_LIMITS.max_seconds
    with pytest.raises(ValueError) as refused:
        Worker(MemoryStore(), app, **knobs)
    assert str(refused.value) == (
        f"{what} must be at most {longest:.0f} seconds, the store's limit "
        f"(Limits.max_seconds), got {PAST_THE_STORE!r}"
    )


def test_the_bound_is_the_stores_own_limit() -> None:
    store = MemoryStore(limits=Limits(max_seconds=60.0))
    app = App({"w": lambda head: None})
    within = Backoff(cap=60.0)
    assert Worker(store, app, ttl=60.0, heartbeat_interval=60.0, backoff=within).ttl == 60.0
    with pytest.raises(ValueError, match=r"^ttl must be at most 60 seconds"):
        Worker(store, app, ttl=61.0, backoff=within)
    with pytest.raises(ValueError, match=r"^Backoff\.cap must be at most 60 seconds"):
        Worker(store, app)  # the default ttl (30 s) and beat (10 s) fit; the cap (300 s) not
    assert Worker(MemoryStore(), app, ttl=DEFAULT_LIMITS.max_seconds).ttl == 315_576_000.0


class CountsRenewals(MemoryStore):
    """A real MemoryStore that counts the claims each ``renew_claims`` call names."""

    def __init__(self) -> None:
        super().__init__()
        self.renewed: list[int] = []

    async def renew_claims(
        self, session_id: str, *, holder: str, claims: Sequence[AttemptRef], ttl: float
    ) -> RenewResult:
        self.renewed.append(len(claims))
        return await super().renew_claims(session_id, holder=holder, claims=claims, ttl=ttl)


async def test_a_renewal_pass_skips_leases_younger_than_half_the_interval() -> None:
    store = CountsRenewals()
    gate = asyncio.Event()
    started: list[Head] = []

    async def handle(head: Head) -> None:
        started.append(head)
        await gate.wait()

    worker = Worker(store, App({"w": handle}), renew_interval=60.0, ttl=120.0)
    async with worker:
        await store.append("s", [NewEvent("job", targets=[Target("w")]) for _ in range(2)])
        await _until(lambda: len(started) == 2)
        await worker.renew_leases()  # both leases were just taken: none is due
        assert store.renewed == []
        await worker.renew_leases(force=True)
        assert store.renewed == [2]
        await worker.renew_leases()  # just renewed: not due again
        assert store.renewed == [2]
        gate.set()
        await asyncio.wait_for(worker.wait_idle(), TIMEOUT)
    assert worker.stats.completed == 2


async def _until(predicate: Callable[[], bool], within: float = TIMEOUT) -> None:
    async def poll() -> None:
        while not predicate():  # noqa: ASYNC110 - the worker's tasks make it true
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), within)
