"""``a2pg`` in-process for the usage errors (fast); ``process.py`` runs real processes."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest

from a2pg.cli import main

Cli = Callable[..., tuple[int, str]]


@pytest.fixture(autouse=True)
def _no_ambient_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests say which database they use; the developer's A2PG_DSN must not leak in."""
    monkeypatch.delenv("A2PG_DSN", raising=False)
    monkeypatch.delenv("A2PG_SCHEMA", raising=False)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """``cli("metrics", "--once", ...)`` runs main() and returns its exit code and stderr."""

    def run(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        try:
            code = main(list(argv), stdout=io.StringIO())
        except SystemExit as exc:  # argparse's usage errors
            code = int(exc.code or 0)
        return code, capsys.readouterr().err

    return run
