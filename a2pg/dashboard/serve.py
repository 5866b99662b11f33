"""Serving the dashboard with uvicorn in the caller's event loop (where the store lives)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import socket
from collections.abc import Callable, Generator
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette

from .app import close_tails

SHUTDOWN_GRACE = 2
"""Seconds open requests (live tails never end on their own) get at shutdown."""


class _Server(uvicorn.Server):
    """Stops on SIGINT or SIGTERM and returns, so the caller closes its store and exits 0
    (uvicorn's own handling re-raises the signal after shutdown, which kills the process).
    ``ready`` is set once it listens."""

    def __init__(self, config: uvicorn.Config, stopping: Callable[[], None]) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()
        self.stopping = stopping

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.ready.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM)
        for sig in signals:
            loop.add_signal_handler(sig, self._stop)
        try:
            yield
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    def _stop(self) -> None:
        if self.should_exit:  # a second Ctrl-C: do not wait for open requests
            self.force_exit = True
        self.should_exit = True
        self.stopping()


@dataclass(frozen=True, slots=True)
class Listener:
    sock: socket.socket
    host: str
    port: int

    def url(self, root_path: str = "") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{root_path}/"


def listen(host: str, port: int) -> Listener:
    """A bound, listening socket (``port`` 0 picks a free one); ``OSError`` when the address
    is taken or not this machine's."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    bound = sock.getsockname()
    return Listener(sock, str(bound[0]), int(bound[1]))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def serve(
    app: Starlette,
    listener: Listener,
    *,
    root_path: str = "",
    log_level: str = "warning",
    access_log: bool = False,
    started: Callable[[str], None] | None = None,
) -> None:
    """Serves ``app`` on ``listener`` until SIGINT or SIGTERM; calls ``started(url)`` once
    it accepts connections."""
    config = uvicorn.Config(
        app,
        root_path=root_path,
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
        lifespan="on",
    )
    server = _Server(config, stopping=lambda: close_tails(app))
    task = asyncio.create_task(server.serve(sockets=[listener.sock]), name="a2pg-dashboard")
    ready = asyncio.create_task(server.ready.wait(), name="a2pg-dashboard-ready")
    await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if server.started and started is not None:
        started(listener.url(root_path))
    await task
