"""The one error type a2pg raises, with a subclass per code so callers can ``except`` by kind."""

from __future__ import annotations

from typing import ClassVar, Literal

ErrorCode = Literal[
    "STORE_NOT_CONFIGURED",
    "PARTIAL_DUPLICATE_BATCH",
    "IDEMPOTENCY_CONFLICT",
    "SESSION_CLEARED",
    "SUPERSEDED_ATTEMPT",
    "INVALID_ARGUMENT",
    "STORE_UNAVAILABLE",
]


class A2Error(Exception):
    """An error of the store contract; ``code`` is stable across backends.

    ``A2Error("SESSION_CLEARED", "...")`` builds the matching subclass, so
    ``except SessionCleared`` works whichever way the error was raised.
    """

    code: str
    message: str
    _by_code: ClassVar[dict[str, type[A2Error]]] = {}
    default_code: ClassVar[str] = ""

    def __new__(cls, code: str | None = None, message: str = "") -> A2Error:
        resolved = code or cls.default_code
        target = cls._by_code.get(resolved, cls) if cls is A2Error else cls
        return super().__new__(target)

    def __init__(self, code: str | None = None, message: str = "") -> None:
        self.code = code or self.default_code
        self.message = message or self.code
        super().__init__(f"{self.code}: {self.message}" if message else self.code)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.default_code:
            A2Error._by_code[cls.default_code] = cls

    def __reduce__(self) -> tuple[object, ...]:
        return (A2Error, (self.code, self.message))


class StoreNotConfigured(A2Error):
    """The database has no a2pg schema, or one of another layout or revision."""

    default_code = "STORE_NOT_CONFIGURED"


class PartialDuplicateBatch(A2Error):
    """A batch repeats an id, or mixes stored and fresh ids."""

    default_code = "PARTIAL_DUPLICATE_BATCH"


class IdempotencyConflict(A2Error):
    """A replayed id is stored with another type or payload."""

    default_code = "IDEMPOTENCY_CONFLICT"


class SessionCleared(A2Error):
    """The work names an index at or below the session's clear marker."""

    default_code = "SESSION_CLEARED"


class SupersededAttempt(A2Error):
    """A cause names an attempt that is no longer the live one."""

    default_code = "SUPERSEDED_ATTEMPT"


class InvalidArgument(A2Error):
    """Bad input: rejected before anything is written."""

    default_code = "INVALID_ARGUMENT"


class StoreUnavailable(A2Error):
    """The store's database cannot be reached, or answered with an outage: a connection
    refused or lost, a pool that timed out, a SQLite file that cannot be opened or stays
    locked past its busy timeout; or the store was closed. SqliteStore and a closed store
    raise it themselves; PostgresStore leaves psycopg's errors as they are, which the CLI
    and the dashboard read as this code (``a2pg.backends.classify``). An outage, never
    the store's answer: a worker retries through it."""

    default_code = "STORE_UNAVAILABLE"


def store_closed() -> StoreUnavailable:
    """What a store answers once closed, on every backend: ``STORE_UNAVAILABLE``."""
    return StoreUnavailable(message="the store is closed: called after close()")


def invalid(message: str) -> InvalidArgument:
    """Shorthand used by validation: an ``INVALID_ARGUMENT`` error."""
    return InvalidArgument("INVALID_ARGUMENT", message)
