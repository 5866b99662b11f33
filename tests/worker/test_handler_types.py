"""Handlers as users annotate them: ``mypy --strict`` (run on tests/ by .ci/run) accepts each
registration, and the worker takes each return the annotation allows."""

from __future__ import annotations

from a2pg import Head, MemoryStore, NewEvent, Target
from a2pg.worker import App, Worker

from .helpers import bounded

app = App()


@app.consumer("one")
def one(head: Head) -> NewEvent:
    return NewEvent("one.done", id="one")


@app.consumer("many")
async def many(head: Head) -> list[NewEvent]:
    return [NewEvent("many.done", id="m1"), NewEvent("many.done", id="m2")]


@app.consumer("tuple")
def as_tuple(head: Head) -> tuple[NewEvent, ...]:
    return (NewEvent("tuple.done", id="t"),)


@app.consumer("nothing")
async def nothing(head: Head) -> None:
    return None


@app.consumer("async-one")
async def async_one(head: Head) -> NewEvent:
    return NewEvent("async-one.done", id="a")


async def test_every_annotated_return_completes_its_head() -> None:
    store = MemoryStore()
    names = ["one", "many", "tuple", "nothing", "async-one"]
    await store.append("s", [NewEvent("go", targets=[Target(name) for name in names])])
    await bounded(Worker(store, app).run_until_idle())
    types = sorted(event.type for event in await store.read("s", after=1))
    assert types == ["async-one.done", "many.done", "many.done", "one.done", "tuple.done"]
