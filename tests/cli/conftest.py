"""Runs ``a2pg`` in-process (fast) or as the installed script (real exit codes, real signals)."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from a2pg.cli import main

A2PG = Path(sys.executable).parent / "a2pg"


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(autouse=True)
def _no_ambient_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests say which database they use; the developer's A2PG_DSN must not leak in."""
    monkeypatch.delenv("A2PG_DSN", raising=False)
    monkeypatch.delenv("A2PG_SCHEMA", raising=False)


Cli = Callable[..., Result]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """``cli("sessions", "--dsn", dsn)`` runs main() and returns code, stdout, stderr."""

    def run(*argv: str) -> Result:
        out = io.StringIO()
        capsys.readouterr()
        try:
            code = main(list(argv), stdout=out)
        except SystemExit as exc:  # argparse usage errors and --help
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Result(code, out.getvalue() + captured.out, captured.err)

    return run


def run_script(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> Result:
    """The installed console script, as a deploy job would run it."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("A2PG_")}
    full_env.update(env or {})
    proc = subprocess.run(
        [str(A2PG), *argv], capture_output=True, text=True, env=full_env, timeout=timeout
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def closed_port_dsn() -> str:
    """A DSN on a local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"postgresql://postgres@127.0.0.1:{port}/nothing"
