"""Real processes for the browser tests: ``a2pg dashboard`` and ``a2pg worker``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

A2PG = Path(sys.executable).parent / "a2pg"
ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0
_SERVING = re.compile(r"serving on (http://\S+/)")


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2PG_")}
    env.update(extra or {})
    return env


def _stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"{proc.args!r} did not stop on SIGTERM") from None


@contextmanager
def dashboard(dsn: str, *options: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``a2pg dashboard --port 0`` on ``dsn``; yields its URL once it listens. Stopped with
    SIGTERM at the end, which must exit 0."""
    proc = subprocess.Popen(
        [str(A2PG), "dashboard", "--dsn", dsn, "--port", "0", "--refresh", "0.5", *options],
        cwd=ROOT,
        env=_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            match = _SERVING.search(line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    reader = threading.Thread(target=read, name="dashboard-stdout", daemon=True)
    reader.start()
    try:
        ready.wait(START_TIMEOUT)
        if not found:
            _stop(proc)
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"the dashboard did not start: {err[-2000:]}")
        yield found[0].rstrip("/")
    finally:
        code = _stop(proc)
        err = proc.stderr.read() if proc.stderr else ""
        assert code == 0, f"the dashboard exited {code}: {err[-2000:]}"
        assert "Traceback" not in err, err


@contextmanager
def workers(dsn: str, app: str, count: int = 1, options: Sequence[str] = ()) -> Iterator[None]:
    """``count`` ``a2pg worker APP`` processes on ``dsn``; SIGTERM at the end (exit 0)."""
    procs = [
        subprocess.Popen(
            [str(A2PG), "worker", app, "--dsn", dsn, "--log-level", "warning", *options],
            cwd=ROOT,
            env=_env(None),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    try:
        yield
    finally:
        for proc in procs:
            code = _stop(proc)
            err = proc.stderr.read() if proc.stderr else ""
            assert code == 0, f"a worker exited {code}: {err[-2000:]}"
