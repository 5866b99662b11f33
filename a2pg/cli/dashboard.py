"""``a2pg dashboard``: serves the web dashboard on a store until Ctrl-C or SIGTERM.

The web parts (Starlette, Jinja2, uvicorn) are the optional extra ``dashboard``, imported
only when the command runs, so the rest of the CLI works without them.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, AddCommand, Command, fail, site
from .options import non_negative_float, positive_float

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from ..dashboard.security import Auth
    from ..dashboard.serve import Listener
    from ..front import CheckedStore
    from ..store import Store

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
WAIT_RETRY_EVERY = 2.0
"""Longest pause between two tries of ``--wait`` (the backoff's cap): a line at least
this often while the database is away."""

DETAILS = """\
Overview (per consumer: ready, claimed, backing off, dead letters, blocked lanes, lag;
workers from their heartbeats; throughput), sessions (searchable by id prefix), one
session (events, cursors, a live tail) and dead letters across sessions with retry and
skip buttons. Binds to 127.0.0.1 unless --host says otherwise. --read-only hides and
refuses every action. Authentication, from the environment: A2PG_DASHBOARD_TOKEN
(requests carry `Authorization: Bearer <token>`) and/or A2PG_DASHBOARD_BASIC
(`user:password`, HTTP basic auth for browsers). Behind a reverse proxy, let the proxy
do TLS (and auth, if you like) and pass --root-path when it serves the dashboard under
a prefix. /healthz (the process serves) and /readyz (the store answers) are for
probes, without authentication, and show no data. --wait SECONDS waits that long for a
database server that is not up yet (a warning per try) before exiting 3, for a
dashboard deployed beside its database. Needs `pip install 'a2pg[dashboard]'`. Exits 1
when it cannot listen on --host/--port."""


def add_parsers(command: AddCommand) -> None:
    """The ``dashboard`` subcommand (``demo --dashboard`` is the demo's: ``add_demo_options``)."""
    parser = command("dashboard", "serve the web dashboard until Ctrl-C", DETAILS)
    add_server_options(parser, prefix="")
    parser.add_argument(
        "--read-only", action="store_true", help="hide every action and refuse every POST"
    )
    parser.add_argument(
        "--wait",
        type=non_negative_float,
        default=0.0,
        metavar="SECONDS",
        help="how long to wait for an unreachable database server at start, retrying with "
        "backoff and a warning per try, before exiting 3 (default 0: one try)",
    )


def add_server_options(parser: argparse.ArgumentParser, *, prefix: str) -> None:
    """--host, --port, --root-path (``prefix`` "dashboard-" gives the demo's names)."""
    parser.add_argument(
        f"--{prefix}host", default=DEFAULT_HOST, help="address to listen on (loopback by default)"
    )
    parser.add_argument(
        f"--{prefix}port", type=_port, default=DEFAULT_PORT, help="port to listen on (0: any free)"
    )
    parser.add_argument(
        f"--{prefix}root-path",
        default="",
        type=_root_path,
        help="the path prefix a reverse proxy serves the dashboard under, e.g. /a2pg",
    )
    parser.add_argument(
        f"--{prefix}refresh",
        type=_refresh,
        default=5.0,
        metavar="SECONDS",
        help="how often the overview refreshes itself",
    )


def add_demo_options(demo: argparse.ArgumentParser) -> None:
    """``a2pg demo --dashboard``: keep the dashboard open on the demo's data afterwards."""
    demo.add_argument(
        "--dashboard",
        action="store_true",
        help="after the run, serve the dashboard on its data until Ctrl-C",
    )
    add_server_options(demo, prefix="dashboard-")


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0-65535, got {value}")
    return value


MAX_REFRESH = 86_400.0


def _refresh(text: str) -> float:
    """Above 0 and finite: the page's script reads ``inf`` as NaN, and a NaN interval
    refreshes without pause."""
    value = positive_float(text)
    if value > MAX_REFRESH:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_REFRESH:.0f}, got {text}")
    return value


def _root_path(text: str) -> str:
    if text and (not text.startswith("/") or text.endswith("/") or "//" in text):
        raise argparse.ArgumentTypeError(
            f"must look like /prefix (no trailing slash), got {text!r}"
        )
    return text


def _require_extra() -> None:
    try:
        import jinja2  # noqa: F401
        import python_multipart  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        fail(
            EXIT_USAGE,
            f"the dashboard needs the 'dashboard' extra ({exc.name} is missing): "
            "pip install 'a2pg[dashboard]'",
        )


@dataclass(frozen=True, slots=True)
class Serving:
    """What the dashboard will serve with, checked before any database is touched."""

    listener: Listener
    auth: Auth
    root_path: str
    refresh: float
    read_only: bool


def prepare(*, host: str, port: int, root_path: str, refresh: float, read_only: bool) -> Serving:
    """Checks the extra, the auth settings and the address (listening on it already), so
    a mistake exits at once, before a demo runs or a store opens."""
    _require_extra()
    from ..dashboard import Auth
    from ..dashboard.serve import is_loopback, listen
    from ..errors import A2Error

    try:
        auth = Auth.from_env()
    except A2Error as exc:
        fail(EXIT_USAGE, exc.message)
    try:
        listener = listen(host, port)
    except OSError as exc:
        fail(EXIT_FAILED, f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    if not is_loopback(listener.host) and not auth.required:
        sys.stderr.write(
            f"a2pg: warning: serving on {listener.host}, beyond this machine, without "
            "authentication: set A2PG_DASHBOARD_TOKEN or A2PG_DASHBOARD_BASIC, or put a "
            "proxy that authenticates in front\n"
        )
    return Serving(listener, auth, root_path, refresh, read_only)


async def serve_store(store: Store, serving: Serving, stdout: TextIO) -> int:
    """Serves the dashboard on ``store`` until a signal; prints the URL once listening."""
    from ..dashboard import create_app
    from ..dashboard.serve import serve

    app = create_app(
        store, read_only=serving.read_only, auth=serving.auth, refresh_seconds=serving.refresh
    )

    def started(url: str) -> None:
        mode = " (read-only)" if serving.read_only else ""
        stdout.write(f"a2pg dashboard: serving on {url}{mode}; Ctrl-C stops it\n")
        stdout.flush()

    await serve(app, serving.listener, root_path=serving.root_path, started=started)
    return EXIT_OK


async def cmd_dashboard(args: argparse.Namespace, stdout: TextIO) -> int:
    serving = prepare(
        host=args.host,
        port=args.port,
        root_path=args.root_path,
        refresh=args.refresh,
        read_only=args.read_only,
    )
    try:
        async with _opening(args) as store:
            return await serve_store(store, serving, stdout)
    finally:
        serving.listener.sock.close()


def _opening(args: argparse.Namespace) -> AbstractAsyncContextManager[CheckedStore]:
    """The store, once its database server answers (``--wait``, as ``a2pg worker``'s);
    a SQLite file is opened at once. The socket listens meanwhile, so the first
    requests wait in its queue rather than being refused."""
    from .secrets import hider
    from .startup import store_when_reachable

    database = site(args)
    if not database.server:
        return database.open_store()
    return store_when_reachable(
        database, wait=args.wait, every=WAIT_RETRY_EVERY, hide=hider(args.dsn)
    )


COMMANDS: dict[str, Command] = {"dashboard": cmd_dashboard}
