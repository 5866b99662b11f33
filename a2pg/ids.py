"""Default id generator and clock: time-ordered UUIDv7 text and the system UTC clock."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Returns the current time as an aware UTC datetime."""

IdGenerator = Callable[[], str]
"""Returns a fresh event id."""

_RANDOM_BYTES = 4000
"""Random bytes read from ``os.urandom`` at a time: 10 an id, so one read makes 400 ids."""

_HEX = "0123456789abcdef"
_BYTE_HEX = [f"{n:02x}" for n in range(256)]
"""A byte as two hex digits (a format spec in the f-string below costs more)."""

_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}
"""A random hex digit as the digit holding the variant bits ``10`` and two random bits."""

_lock = threading.Lock()
_last_ms = 0
"""The millisecond of the last id (ahead of the clock once a millisecond's sequence ran out)."""
_seq = 0
"""The last id's sequence within ``_last_ms``."""
_prefix = ""
"""The last id's text up to its sequence: the timestamp and the version nibble."""
_random = ""
"""Random hex digits not used yet from ``_random_at`` on, 20 an id."""
_random_at = 0


def _forget_random() -> None:
    """After a fork: a new lock, and none of the parent's unused random digits (the child
    would otherwise hand out the parent's next ids' random parts)."""
    global _lock, _random, _random_at
    _lock = threading.Lock()
    _random, _random_at = "", 0


os.register_at_fork(after_in_child=_forget_random)


def uuid7() -> str:
    """A UUIDv7 (RFC 9562) as text: sortable by creation time, monotonic within a process.

    ``unix_ts_ms`` is the clock's millisecond; ``rand_a`` a sequence, started at a random
    value below 2048 each new millisecond and counted up within it (past 4095 the id moves
    on to the next millisecond, so ids stay in order); ``rand_b`` 62 random bits. Safe to
    call from any thread: ids are handed out under a lock, each greater than the last, never
    the same twice. Random bits come from ``os.urandom``, read ahead 4,000 bytes at a time.
    """
    global _last_ms, _seq, _prefix, _random, _random_at
    with _lock:
        at = _random_at
        if at + 20 > len(_random):
            _random, at = os.urandom(_RANDOM_BYTES).hex(), 0
        _random_at = at + 20
        digits = _random
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms = ms
            _seq = seq = int(digits[at + 16 : at + 19], 16) >> 1
            _prefix = prefix = f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-7"
        else:
            seq = _seq + 1
            if seq > 0xFFF:
                _last_ms = ms = _last_ms + 1
                seq = 0
                _prefix = f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-7"
            _seq = seq
            prefix = _prefix
    return (
        f"{prefix}{_HEX[seq >> 8]}{_BYTE_HEX[seq & 0xFF]}-{_VARIANT[digits[at]]}"
        f"{digits[at + 1 : at + 4]}-{digits[at + 4 : at + 16]}"
    )


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
