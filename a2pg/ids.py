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
