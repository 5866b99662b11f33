"""Default id generator and clock: time-ordered UUIDv7 text and the system UTC clock."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Returns the current time as an aware UTC datetime."""

IdGenerator = Callable[[], str]
"""Returns a fresh event id."""

_last_ms = 0
_seq = 0


def uuid7() -> str:
    """A UUIDv7 (RFC 9562) as text: sortable by creation time, monotonic within a process."""
    global _last_ms, _seq
    ms = time.time_ns() // 1_000_000
    if ms <= _last_ms:
        ms = _last_ms
        _seq = (_seq + 1) & 0xFFF
        if _seq == 0:
            ms += 1
    else:
        _seq = int.from_bytes(os.urandom(2)) & 0x7FF
    _last_ms = ms
    rand_b = int.from_bytes(os.urandom(8)) & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (_seq << 64) | (0b10 << 62) | rand_b
    return str(uuid.UUID(int=value))


def system_clock() -> datetime:
    return datetime.now(UTC)


class FakeClock:
    """A clock tests move by hand, so leases and backoffs expire without sleeping.

    Starts at a fixed instant (microsecond precision, as PostgreSQL stores it).
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        from datetime import timedelta

        self._now += timedelta(seconds=seconds)
        return self._now

    def set(self, when: datetime) -> None:
        self._now = when


class SequentialIds:
    """Predictable ids (``prefix-1``, ``prefix-2``, ...) for tests."""

    def __init__(self, prefix: str = "id") -> None:
        self._prefix = prefix
        self._next = 0

    def __call__(self) -> str:
        self._next += 1
        return f"{self._prefix}-{self._next:08d}"
