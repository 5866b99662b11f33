"""The operating commands: ``migrate``, ``check`` and ``worker MODULE:APP``."""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from ..contract.limits import DEFAULT_LIMITS
from ..front import CheckedStore
from ..store import Store
from ..worker import WorkerSettings
from . import output as out
from .app_target import load_app
from .common import (
    EXIT_HANDLERS_RUNNING,
    EXIT_NOT_MIGRATED,
    EXIT_OK,
    EXIT_USAGE,
    AddCommand,
    Command,
    fail,
    site,
)
from .options import add_options, from_args, non_negative_float, positive_float, positive_int
from .secrets import hider

if TYPE_CHECKING:
    from ..worker import HandlersStillRunning

MIGRATE_SQL_HELP = (
    "print the migration's SQL (from an empty schema to the head, for a DBA to run) "
    "instead of running it; needs no database"
)


def add_parsers(command: AddCommand) -> None:
    """``migrate``, ``check``, ``worker``."""
    migrate = command(
        "migrate", "create or upgrade the a2pg schema (idempotent, safe to run concurrently)"
    )
    migrate.add_argument("--sql", action="store_true", help=MIGRATE_SQL_HELP)
    migrate.add_argument(
        "--lock-timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="how long each DDL statement waits for a table lock (PostgreSQL; default: 5): "
        "past it the migration rolls back, is tried 3 times in all, then exits 1 naming "
        "the sessions that hold the locks; workers stall behind it at most this long",
    )
    migrate.add_argument(
        "--citus-shards",
        type=positive_int,
        default=None,
        metavar="N",
        help="on Citus, the shard count of the session tables when the migration "
        "distributes them (default: $A2PG_CITUS_SHARDS, else Citus's citus.shard_count); "
        "plain PostgreSQL ignores it",
    )
    command("check", "check the schema layout is current (exit 4 when `a2pg migrate` is needed)")
    worker = command("worker", "run the consumers of MODULE:APP until SIGINT/SIGTERM")
    worker.add_argument("app", metavar="MODULE:APP", help="where the App is, e.g. myproj.jobs:app")
    add_worker_options(worker)


def add_worker_options(worker: argparse.ArgumentParser) -> None:
    """One option per ``WorkerSettings`` field; ``backoff`` as ``--retry-base/--retry-cap``."""
    from ..backoff import Backoff
    from .observe import add_worker_observability_options
    from .startup import DEFAULT_WAIT

    add_options(worker, WorkerSettings, skip={"backoff"})
    worker.add_argument(
        "--consumers",
        type=consumer_names,
        default=None,
        metavar="NAMES",
        help="serve only these of the app's consumers, comma-separated (like "
        "replies,mailer): claim only their heads, register only their log consumers; "
        "run another worker for the rest. A name the app does not declare, or one "
        "given twice, exits 2 (default: every consumer)",
    )
    backoff = Backoff()
    worker.add_argument(
        "--retry-base",
        type=positive_float,
        default=None,
        help=f"seconds before the first retry; doubles per failure (default: {backoff.base})",
    )
    worker.add_argument(
        "--retry-cap",
        type=positive_float,
        default=None,
        help=f"longest wait before a retry, seconds (default: {backoff.cap})",
    )
    worker.add_argument(
        "--no-listen", action="store_true", help="poll only; do not LISTEN for notifications"
    )
    worker.add_argument(
        "--wait",
        type=non_negative_float,
        default=DEFAULT_WAIT,
        metavar="SECONDS",
        help="how long to wait for an unreachable database at start, retrying with backoff "
        "and a warning per try, before exiting 3; 0 exits 3 at once",
    )
    worker.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="logging level",
    )
    add_worker_observability_options(worker)


def consumer_names(text: str) -> list[str]:
    """``--consumers``: comma-separated names, blanks around each dropped; an empty one
    is a usage error (the app's check of the names comes once it is loaded)."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(
            f"must be consumer names, comma-separated (like replies,mailer), got {text!r}"
        )
    return names


def _layout_json(status: Any) -> dict[str, Any]:
    where = {"path": status.path} if hasattr(status, "path") else {"schema": status.schema}
    return {
        "state": status.state,
        "current": status.is_current,
        **where,
        "revision": status.revision,
        "expected": status.expected,
        "description": status.describe(),
        "fix": status.fix(),
    }


async def cmd_migrate(args: argparse.Namespace, stdout: TextIO) -> int:
    """Applies the migrations, then reports the layout the way ``check`` does; with
    ``--sql``, prints the migration's SQL instead, connecting nowhere."""
    database = site(args)
    if args.sql:
        script = io.StringIO()
        database.write_migration_sql(script)  # INVALID_ARGUMENT (exit 2) where there is none
        if args.json:
            fail(EXIT_USAGE, "--sql prints SQL, which has no --json form")
        stdout.write(script.getvalue())
        return EXIT_OK
    await database.reachable()
    before = await database.layout()
    # current: nothing to do, and no right needed to do it
    after = before if before.is_current else await database.migrate()
    return _migrated(args, stdout, before, after)


def _migrated(args: argparse.Namespace, stdout: TextIO, before: Any, after: Any) -> int:
    if args.json:
        out.write_json(stdout, {"before": _layout_json(before), "after": _layout_json(after)})
    elif before.is_current:
        stdout.write(f"already current: {after.describe()}\n")
    else:
        stdout.write(f"migrated: {after.describe()}\n")
    return EXIT_OK if after.is_current else EXIT_NOT_MIGRATED


async def cmd_check(args: argparse.Namespace, stdout: TextIO) -> int:
    """Exit 0 when the layout is current; 4, naming the fix, when it is not."""
    database = site(args)
    await database.reachable()
    status = await database.layout()
    if args.json:
        out.write_json(stdout, _layout_json(status))
    elif status.is_current:
        stdout.write(f"ok: {status.describe()}\n")
    if not status.is_current:
        fail(EXIT_NOT_MIGRATED, f"{status.describe()}; {status.fix()}")
    return EXIT_OK


def worker_settings(args: argparse.Namespace) -> WorkerSettings:
    """The worker's settings from the command line; a bad value is a usage error (exit 2)."""
    from ..backoff import Backoff

    default = Backoff()
    base = args.retry_base if args.retry_base is not None else default.base
    cap = args.retry_cap if args.retry_cap is not None else max(default.cap, base)
    if cap < base:
        fail(EXIT_USAGE, f"--retry-cap ({cap}) must be at least --retry-base ({base})")
    try:
        backoff = Backoff(base=base, cap=cap)
    except ValueError as exc:
        fail(EXIT_USAGE, str(exc))
    settings = from_args(WorkerSettings, args, backoff=backoff)
    try:  # what the store would refuse, once running: said now, on one line
        settings.refuse_past(DEFAULT_LIMITS)  # the limits of the stores the commands open
    except ValueError as exc:
        fail(EXIT_USAGE, str(exc))
    return settings


async def cmd_worker(args: argparse.Namespace, stdout: TextIO) -> int:
    """Waits for a database server (``--wait``), then runs the app's consumers until
    SIGTERM or SIGINT, then drains and exits 0. A file (``--sqlite``) is opened at once:
    a missing or unmigrated one exits 4. Sync handlers still running in their threads
    after the grace are not waited for: once the store is closed and the logs flushed,
    the process ends at once with exit code 6, their claims left to lapse."""
    from ..worker import HandlersStillRunning, serve
    from .observe import setup_logging, worker_observers
    from .startup import store_when_reachable

    settings = worker_settings(args)
    setup_logging(args)
    app = load_app(args.app)
    consumers = app.served(args.consumers)  # a name it lacks: exit 2, before connecting
    database = site(args)
    opening: AbstractAsyncContextManager[CheckedStore]
    if database.server:
        opening = store_when_reachable(
            database, wait=args.wait, every=settings.poll_interval, hide=hider(args.dsn)
        )
    else:
        opening = database.open_store()
    where = database.describe()
    left: HandlersStillRunning | None = None
    with worker_observers(args) as observers:
        async with opening as store:
            served: Store = store
            if args.no_listen:
                from ..worker.polling import PollingOnly

                served = PollingOnly(store)
            names = ", ".join(c.name for c in consumers)
            # Not "serving" yet: the worker says so once its SIGTERM handler is in place.
            logging.getLogger("a2pg.worker").info(
                "starting %s on %s%s", names, where, " (polling only)" * args.no_listen
            )
            with observers.watching(store):  # the worker logs its stats once, as it stops
                try:
                    await serve(
                        served,
                        app,
                        settings=settings,
                        hooks=observers.hooks,
                        consumers=args.consumers,
                    )
                except HandlersStillRunning as error:
                    left = error
    if left is not None:
        _exit_leaving_threads(left)
    return EXIT_OK


def _exit_leaving_threads(left: HandlersStillRunning) -> NoReturn:
    """Ends the process without joining the handler threads (the interpreter's exit would
    wait for each to return, however long, its head claimed all the while): the worker
    has stopped, the store is closed and the observers flushed; the logs are flushed here.
    ``os._exit`` rather than daemon threads: no handler code runs on while the
    interpreter tears its modules down, and no exit handler waits for a thread."""
    logging.getLogger("a2pg.worker").error(
        "exiting with code %d without waiting for %d sync handlers still running (%s); "
        "their leases lapse within %gs and the next claim of each counts a failure",
        EXIT_HANDLERS_RUNNING,
        len(left.attempts),
        ", ".join(left.attempts),
        left.ttl,
    )
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_HANDLERS_RUNNING)


COMMANDS: dict[str, Command] = {"migrate": cmd_migrate, "check": cmd_check, "worker": cmd_worker}
