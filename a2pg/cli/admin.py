"""The operating commands: ``migrate``, ``check`` and ``worker MODULE:APP``."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path
from typing import Any, TextIO

from ..postgres.connect import check_reachable
from ..store import Store
from ..worker import WorkerSettings
from . import output as out
from .app_target import load_app
from .common import (
    EXIT_NOT_MIGRATED,
    EXIT_OK,
    EXIT_USAGE,
    describe_dsn,
    fail,
    open_cli_store,
    sqlite_path,
    store_options,
)
from .options import from_args


def _schema(args: argparse.Namespace) -> str:
    from ..postgres.layout import DEFAULT_SCHEMA

    schema: str = args.schema or DEFAULT_SCHEMA
    return schema


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
    path = sqlite_path(args)
    if path is not None:
        if args.sql:
            fail(EXIT_USAGE, "--sql prints PostgreSQL's migration SQL: not with --sqlite")
        return await _migrate_sqlite(args, stdout, path)
    from ..postgres.layout import inspect_layout
    from ..postgres.migrate import upgrade, write_script

    schema = _schema(args)
    if args.sql:
        if args.json:
            fail(EXIT_USAGE, "--sql prints SQL, which has no --json form")
        write_script(stdout, schema)
        return EXIT_OK
    await check_reachable(args.dsn)
    before = await asyncio.to_thread(inspect_layout, args.dsn, schema)
    if before.state != "current":  # current: nothing to do, and no right needed to do it
        await asyncio.to_thread(upgrade, args.dsn, schema)
    after = await asyncio.to_thread(inspect_layout, args.dsn, schema)
    return _migrated(args, stdout, before, after)


async def _migrate_sqlite(args: argparse.Namespace, stdout: TextIO, path: Path) -> int:
    from ..sqlite.layout import inspect_file
    from ..sqlite.migrate import upgrade

    before = await asyncio.to_thread(inspect_file, path)
    after = await asyncio.to_thread(upgrade, path)
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
    path = sqlite_path(args)
    status: Any
    if path is not None:
        from ..sqlite.layout import inspect_file

        status = await asyncio.to_thread(inspect_file, path)
    else:
        from ..postgres.layout import inspect_layout

        await check_reachable(args.dsn)
        status = await asyncio.to_thread(inspect_layout, args.dsn, _schema(args))
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
    return from_args(WorkerSettings, args, backoff=backoff)


async def cmd_worker(args: argparse.Namespace, stdout: TextIO) -> int:
    """Waits for the database (``--wait``), then runs the app's consumers until SIGTERM or
    SIGINT, then drains and exits 0. A SQLite file (``--sqlite``) is opened at once: a
    missing or unmigrated one exits 4."""
    from ..worker import serve
    from .observe import setup_logging, worker_observers
    from .startup import store_when_reachable

    settings = worker_settings(args)
    setup_logging(args)
    app = load_app(args.app)
    path = sqlite_path(args)
    if path is not None:
        opening = open_cli_store(args)
        where = f"SQLite {path}"
    else:
        opening = store_when_reachable(
            args.dsn,
            args.schema,
            wait=args.wait,
            every=settings.poll_interval,
            **store_options(args),
        )
        where = describe_dsn(args.dsn)
    with worker_observers(args) as observers:
        async with opening as store:
            served: Store = store
            if args.no_listen:
                from ..worker.polling import PollingOnly

                served = PollingOnly(store)
            names = ", ".join(c.name for c in app.consumers)
            # Not "serving" yet: the worker says so once its SIGTERM handler is in place.
            logging.getLogger("a2pg.worker").info(
                "starting %s on %s%s", names, where, " (polling only)" * args.no_listen
            )
            with observers.watching(store):  # the worker logs its stats once, as it stops
                await serve(served, app, settings=settings, hooks=observers.hooks)
    return EXIT_OK
