"""A tiny App for ``a2pg worker tests.cli.sample_app:app`` in the worker command tests."""

from __future__ import annotations

from a2pg.models import Head, NewEvent
from a2pg.worker.app import App

app = App()
not_an_app = 42


@app.consumer("echo")
async def echo(head: Head) -> list[NewEvent]:
    return [NewEvent("echoed", {"of": head.index})]


def make_app() -> App:
    """A factory: ``a2pg worker tests.cli.sample_app:make_app`` calls it."""
    return app


empty_app = App()


def failing_factory() -> App:
    """A factory whose set-up fails: ``a2pg worker`` shows the error in one line."""
    raise RuntimeError("JOBS_CONFIG is not set")


def not_a_factory() -> dict[str, int]:
    return {}
