"""``a2pg worker --otel-exporter console|otlp``: spans exported by the SDK the worker sets
up, and a usage error naming the install when the SDK or the OTLP exporter is missing."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import IO

import pytest

from a2pg import NewEvent, Target
from a2pg.sqlite import SqliteStore, upgrade

from ..worker.helpers import bounded
from .process import ROOT, a2pg_command, eventually, run_a2pg

APP = "tests.observability.sample_app:app"


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "a2.db"
    upgrade(path)
    return path


@pytest.mark.parametrize(
    ("exporter", "blocked", "names"),
    [
        ("console", ("opentelemetry.sdk",), "pip install opentelemetry-sdk"),
        ("otlp", ("opentelemetry.sdk",), "pip install opentelemetry-sdk"),
        ("otlp", ("opentelemetry.exporter",), "pip install opentelemetry-exporter-otlp"),
        ("console", ("opentelemetry",), "pip install 'a2pg[otel]' opentelemetry-sdk"),
    ],
)
def test_a_missing_package_is_a_usage_error_naming_it(
    database: Path, exporter: str, blocked: tuple[str, ...], names: str
) -> None:
    code, err = run_a2pg(
        "worker", APP, "--sqlite", str(database), "--otel-exporter", exporter, blocked=blocked
    )
    assert code == 2, err
    assert err.startswith("a2pg: error: --otel-exporter") and names in err, err


def test_an_unknown_exporter_is_refused(database: Path) -> None:
    code, err = run_a2pg("worker", APP, "--sqlite", str(database), "--otel-exporter", "zipkin")
    assert code == 2
    assert "invalid choice: 'zipkin'" in err


def spans_in(text: str) -> list[dict[str, object]]:
    """The console exporter's output: one indented JSON object per span."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    while (start := text.find("{", at)) != -1:
        value, at = decoder.raw_decode(text, start)
        found.append(value)
    return found


def start(argv: tuple[str, ...], stdout: IO[str], stderr: IO[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        a2pg_command(*argv),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        text=True,
    )


async def test_console_prints_the_attempt_spans(database: Path, tmp_path: Path) -> None:
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    argv = ("worker", APP, "--sqlite", str(database), "--otel-exporter", "console")
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = start((*argv, "--poll-interval", "0.05"), stdout, stderr)
        try:

            async def serving() -> bool:
                return "serving echo" in err.read_text() or proc.poll() is not None

            await eventually(serving)
            await asyncio.sleep(0.3)  # a few idle polls: no spans
            store = await SqliteStore.open(database)
            try:
                await store.append("s", [NewEvent("ping", targets=[Target("echo")])])

                async def echoed() -> bool:
                    return any(e.type == "echoed" for e in await store.read("s"))

                await eventually(echoed)
            finally:
                await store.close()
            proc.send_signal(signal.SIGTERM)
            assert await bounded(asyncio.to_thread(proc.wait), within=30) == 0, err.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    spans = spans_in(out.read_text())
    names = [span["name"] for span in spans]
    assert "a2pg.attempt" in names, names
    [attempt] = [span for span in spans if span["name"] == "a2pg.attempt"]
    resource = attempt["resource"]
    assert isinstance(resource, dict)
    assert resource["attributes"]["service.name"] == "a2pg-worker"
    assert "a2pg.store.next_due_in" not in names and "a2pg.store.heartbeat" not in names
