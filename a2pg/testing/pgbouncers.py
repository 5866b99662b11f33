"""A PgBouncer process of a test's own, in front of a PostgreSQL server.

Apart from the plugin because it is a process to manage (config, port, start, stop),
which the ``pgbouncer`` fixture only hands out; tests of code behind a pooler can also
start one directly.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

PGBOUNCER_ENV = "A2PG_PGBOUNCER"
"""The ``pgbouncer`` executable to run (default: found on PATH or in an sbin folder)."""
PGBOUNCER_START_TIMEOUT = 10.0
PGBOUNCER_USER = "postgres"
"""The account PgBouncer runs under when the tests run as root (it refuses root);
``nobody`` when there is no such account."""
PoolMode = str


class PgBouncerUnavailable(RuntimeError):
    """No ``pgbouncer`` executable here."""


def find_pgbouncer() -> str:
    """The ``pgbouncer`` executable (Debian puts it in /usr/sbin, often not on PATH)."""
    given = os.environ.get(PGBOUNCER_ENV)
    if given:
        return given
    found = shutil.which("pgbouncer")
    for candidate in (found, "/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise PgBouncerUnavailable(
        "pgbouncer is not installed (Debian/Ubuntu: apt-get install pgbouncer; "
        f"or set {PGBOUNCER_ENV} to its path)"
    )


def _quoted(value: str) -> str:
    """A value of a PgBouncer ``[databases]`` connect string."""
    return "'" + value.replace("'", "''") + "'"


def _loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PgBouncer:
    """A PgBouncer process of its own, on a free loopback port, in front of the server
    ``server_dsn`` points at, every database of it reachable (``auth_type = any``:
    clients log in with any user, PgBouncer as the DSN's user)."""

    def __init__(
        self,
        server_dsn: str,
        pool_mode: PoolMode = "transaction",
        *,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        if pool_mode not in ("session", "transaction", "statement"):
            raise ValueError(f"pool_mode must be session, transaction or statement: {pool_mode!r}")
        self.server_dsn = server_dsn
        self.pool_mode = pool_mode
        self.settings = dict(settings or {})
        self.binary = find_pgbouncer()
        self.port = 0
        self._dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def version(self) -> str:
        """``PgBouncer 1.18.0``: the first line of ``pgbouncer --version``."""
        done = subprocess.run([self.binary, "--version"], capture_output=True, check=False)
        return done.stdout.decode(errors="replace").split("\n", 1)[0].strip()

    def dsn(self, database_dsn: str) -> str:
        """``database_dsn``'s database (and user) through this PgBouncer."""
        params = conninfo_to_dict(database_dsn)
        return make_conninfo(
            host="127.0.0.1",
            port=str(self.port),
            dbname=str(params.get("dbname") or "postgres"),
            user=str(params.get("user") or "postgres"),
        )

    def config(self) -> str:
        """The pgbouncer.ini this process runs with."""
        server = conninfo_to_dict(self.server_dsn)
        target = {
            key: str(server[key]) for key in ("host", "port", "user", "password") if server.get(key)
        }
        target.setdefault("user", "postgres")
        connect = " ".join(f"{key}={_quoted(value)}" for key, value in target.items())
        settings = {
            "listen_addr": "127.0.0.1",
            "listen_port": str(self.port),
            "unix_socket_dir": "",
            "auth_type": "any",
            "pool_mode": self.pool_mode,
            "max_client_conn": "1000",
            "default_pool_size": "40",
            "server_reset_query": "DISCARD ALL",
            "ignore_startup_parameters": "extra_float_digits",
            **self.settings,
        }
        lines = ["[databases]", f"* = {connect}", "", "[pgbouncer]"]
        lines += [f"{key} = {value}" for key, value in settings.items()]
        return "\n".join(lines) + "\n"

    def start(self) -> PgBouncer:
        """Starts PgBouncer and waits until it accepts connections."""
        if self._process is not None:
            return self
        self.port = _loopback_port()
        self._dir = Path(tempfile.mkdtemp(prefix="a2pg-pgbouncer-"))
        os.chmod(self._dir, 0o755)  # readable by the account PgBouncer switches to
        ini = self._dir / "pgbouncer.ini"
        ini.write_text(self.config())
        os.chmod(ini, 0o644)
        command = [self.binary]
        if os.geteuid() == 0:
            command += ["-u", _pgbouncer_account()]
        command.append(str(ini))
        log = (self._dir / "pgbouncer.log").open("wb")
        try:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + PGBOUNCER_START_TIMEOUT
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                break
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return
            time.sleep(0.05)
        output = self.output()
        self.stop()
        raise RuntimeError(f"pgbouncer did not start: {output[-2000:]}")

    def output(self) -> str:
        """What PgBouncer logged so far."""
        if self._dir is None or not (self._dir / "pgbouncer.log").exists():
            return ""
        return (self._dir / "pgbouncer.log").read_text(errors="replace")

    def stop(self) -> None:
        """Stops the process (immediate shutdown) and removes its folder."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _pgbouncer_account() -> str:
    import pwd

    try:
        pwd.getpwnam(PGBOUNCER_USER)
    except KeyError:
        return "nobody"
    return PGBOUNCER_USER
