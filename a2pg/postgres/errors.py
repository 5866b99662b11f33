"""The one place psycopg errors become a2pg's, and the retry of transient ones."""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import psycopg
from psycopg import errors as pg
from psycopg_pool import PoolTimeout, TooManyRequests

from ..errors import A2Error, invalid

T = TypeVar("T")

log = logging.getLogger("a2pg.postgres")

ROLLED_BACK = (pg.SerializationFailure, pg.DeadlockDetected)
"""The server aborted the transaction: nothing of it was written, any operation may rerun."""

_CONNECTION_SQLSTATES = ("08", "57P01", "57P02", "57P03")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently transient failures are retried."""

    attempts: int = 4
    first_delay: float = 0.02
    max_delay: float = 0.5


DEFAULT_RETRY = RetryPolicy()


class CallTimeout(psycopg.OperationalError):
    """A store call that the database did not answer within the store's ``call_timeout``.

    The call's connection was dropped (a silent socket is never reused) and its
    statement cancelled. Like a lost connection, an outage (``STORE_UNAVAILABLE`` to the
    CLI), and the outcome of a commit in flight is unknown; unlike one, not retried
    within the call: its time is up (see ``a2pg.postgres.deadlines``).
    """


_RELAYED_LOSS = re.compile(
    r"server closed the connection unexpectedly|connection to the remote node .* failed"
    r"|terminating connection"
)
"""What Citus's coordinator says when its connection to a worker node broke mid-statement."""


def relayed_loss(exc: BaseException) -> bool:
    """Citus relays a worker node's broken connection as an internal error (XX000)."""
    return (
        isinstance(exc, psycopg.Error)
        and exc.sqlstate == "XX000"
        and _RELAYED_LOSS.search(str(exc)) is not None
    )


def connection_lost(exc: BaseException) -> bool:
    """Whether the connection broke (the outcome of an in-flight commit is then unknown),
    the store's own or, on Citus, the coordinator's to a worker node."""
    if relayed_loss(exc):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    if isinstance(exc, pg.QueryCanceled | PoolTimeout | TooManyRequests):
        return False
    state = exc.sqlstate
    return state is None or state.startswith(_CONNECTION_SQLSTATES)


def transient(exc: BaseException, *, idempotent: bool) -> bool:
    """Whether running the operation again is safe and may succeed (not once the call's
    deadline passed)."""
    if isinstance(exc, CallTimeout):
        return False
    if isinstance(exc, ROLLED_BACK):
        return True
    return idempotent and connection_lost(exc)


_UNIQUE = re.compile(r'^duplicate key value violates unique constraint "(.+?)(?:_\d+)?"$')
_SHARD_SUFFIX = re.compile(r"_\d+$")


def violated(exc: psycopg.Error) -> str | None:
    """The unique constraint ``exc`` says a write broke, if that is what it says. On
    Citus a constraint is the shard's (``a2_events_event_id_102008``): named so by a
    node written directly, in the message only through the coordinator, which may
    report it as an internal error; each reads as the table's (no constraint of a2pg's
    ends in digits)."""
    if exc.sqlstate not in ("23505", "XX000"):
        return None
    if exc.diag.constraint_name is not None and exc.sqlstate == "23505":
        return _SHARD_SUFFIX.sub("", exc.diag.constraint_name)
    found = _UNIQUE.match(exc.diag.message_primary or "")
    return None if found is None else found.group(1)


@contextmanager
def translated() -> Iterator[None]:
    """Turns the psycopg errors that mean bad input or a missing schema into ``A2Error``.

    Everything else propagates unchanged: database errors are never swallowed.
    """
    try:
        yield
    except pg.UndefinedTable as exc:
        raise A2Error(
            "STORE_NOT_CONFIGURED",
            f"a2pg's tables are missing ({exc.diag.message_primary}); run `a2pg migrate`",
        ) from exc
    except (pg.UniqueViolation, pg.InternalError_) as exc:
        if violated(exc) == "a2_events_event_id":
            raise A2Error(
                "PARTIAL_DUPLICATE_BATCH",
                f"an event id of the batch already exists ({exc.diag.message_detail})",
            ) from exc
        raise
    except pg.NumericValueOutOfRange as exc:
        raise invalid(f"a number beyond PostgreSQL's range: {exc.diag.message_primary}") from exc
    except (pg.UntranslatableCharacter, pg.CharacterNotInRepertoire) as exc:
        raise invalid(f"text PostgreSQL cannot store: {exc.diag.message_primary}") from exc


async def retrying(
    operation: Callable[[], Awaitable[T]],
    *,
    idempotent: bool,
    policy: RetryPolicy = DEFAULT_RETRY,
    on_connection_lost: Callable[[], None] | None = None,
) -> T:
    """Runs ``operation`` (one whole transaction), again after a transient failure.

    Deadlocks and serialization failures rolled everything back, so they are retried
    for every operation; a lost connection only for idempotent ones, since its last
    commit may or may not have happened. ``on_connection_lost`` hears of every lost
    connection, retried or not (the store then checks its idle connections).
    """
    for attempt in range(1, policy.attempts + 1):
        try:
            with translated():
                return await operation()
        except CallTimeout:
            raise  # its connection is dropped already, and no time is left to retry
        except psycopg.Error as exc:
            if on_connection_lost is not None and connection_lost(exc):
                on_connection_lost()
            if attempt == policy.attempts or not transient(exc, idempotent=idempotent):
                raise
            delay = min(policy.max_delay, policy.first_delay * 2 ** (attempt - 1))
            log.info("retrying after a transient database error: %s", exc)
            await asyncio.sleep(delay * (0.5 + random.random()))
    raise AssertionError("unreachable")
