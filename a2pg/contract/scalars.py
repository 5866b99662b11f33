"""Checks of scalar arguments (texts, names, numbers, durations, times) and of list arguments;
each bounds what it reads before it reads it all."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import islice

from ..errors import A2Error, invalid
from .limits import (
    DEFAULT_LIMITS,
    EARLIEST_TIME,
    LATEST_TIME,
    MAX_ATTEMPT,
    MAX_INDEX,
    Limits,
)
from .render import show, type_name

REDRIVE_ACTIONS = ("retry", "skip")


def over(what: str, size: object, setting: str, limit: int) -> A2Error:
    return invalid(f"{what} is {size} long, over the limit Limits.{setting}={limit}")


# -- lists ----------------------------------------------------------------------------


def items(value: object, what: str, *, limit: int, setting: str) -> list[object]:
    """The items of a list argument, as the types say: a ``Sequence`` (a list, a tuple, a
    deque...) but a str, bytes or memoryview, at most ``limit`` long. An iterator, a
    generator, a set or a mapping is refused whatever it holds (an empty generator too):
    it has no order to keep, or a retry would find it used up. A sequence's length is
    read first and its items at most one past ``limit``, so a huge one is not drained."""
    if type(value) is list or type(value) is tuple:  # the common case, without ABC checks
        if len(value) <= limit:
            return list(value)
        raise _too_many(what, limit, setting)
    if isinstance(value, str | bytes | bytearray | memoryview) or not isinstance(value, Sequence):
        raise invalid(f"{what} must be a sequence (a list or a tuple), not {type_name(value)}")
    try:
        size = len(value)
    except OverflowError:  # longer than sys.maxsize
        size = limit + 1
    if size > limit:
        raise _too_many(what, limit, setting)
    taken = list(islice(value, limit + 1))
    if len(taken) > limit:
        raise _too_many(what, limit, setting)
    return taken


def _too_many(what: str, limit: int, setting: str) -> A2Error:
    return invalid(f"{what} holds more than {limit} items, over the limit Limits.{setting}={limit}")


# -- texts ----------------------------------------------------------------------------


def check_text(
    value: object,
    what: str,
    *,
    max_length: int,
    setting: str,
    max_bytes: int,
    bytes_setting: str,
) -> str:
    """A non-empty ``str`` without NUL, valid UTF-8, at most ``max_length`` characters and
    ``max_bytes`` UTF-8 bytes (the length is checked first, so a huge text costs nothing)."""
    if not isinstance(value, str):
        raise invalid(f"{what} must be a str, not {type_name(value)}")
    if not value:
        raise invalid(f"{what} must not be empty")
    if len(value) > max_length:
        raise over(what, len(value), setting, max_length)
    if "\x00" in value:
        raise invalid(f"{what} must not contain NUL (\\u0000)")
    size = utf8_size(value, what)
    if size > max_bytes:
        raise invalid(
            f"{what} is {size} bytes in UTF-8, over the limit Limits.{bytes_setting}={max_bytes}"
        )
    return value


def plain_text(value: object, max_length: int, max_bytes: int) -> bool:
    """Whether ``check_text`` with these limits returns ``value`` as it is and the value is
    an exact ``str``: the common case, checked without building an error."""
    if type(value) is not str or not value or len(value) > max_length or "\x00" in value:
        return False
    if value.isascii():  # one byte a character; a flag of the str, not a scan
        return len(value) <= max_bytes
    try:
        return len(value.encode()) <= max_bytes
    except UnicodeEncodeError:  # a lone surrogate
        return False


def utf8_size(text: str, what: str) -> int:
    """Bytes of ``text`` in UTF-8. PostgreSQL stores UTF-8: a lone surrogate
    (``"\\ud800"``) has no encoding and is refused."""
    try:
        return len(text.encode())
    except UnicodeEncodeError:
        raise invalid(f"{what} is not valid Unicode: it holds a lone surrogate") from None


def check_session_id(session_id: object, limits: Limits = DEFAULT_LIMITS) -> str:
    return check_text(
        session_id,
        "session id",
        max_length=limits.max_session_id_length,
        setting="max_session_id_length",
        max_bytes=limits.max_session_id_bytes,
        bytes_setting="max_session_id_bytes",
    )


def check_name(value: object, what: str, limits: Limits = DEFAULT_LIMITS) -> str:
    """A consumer, lane, reducer or holder name, or a presence namespace, participant or field."""
    return check_text(
        value,
        what,
        max_length=limits.max_name_length,
        setting="max_name_length",
        max_bytes=limits.max_name_bytes,
        bytes_setting="max_name_bytes",
    )


def check_event_id(value: object, limits: Limits = DEFAULT_LIMITS) -> str:
    return check_text(
        value,
        "event id",
        max_length=limits.max_id_length,
        setting="max_id_length",
        max_bytes=limits.max_id_bytes,
        bytes_setting="max_id_bytes",
    )


def check_event_type(value: object, what: str, limits: Limits = DEFAULT_LIMITS) -> str:
    return check_text(
        value,
        what,
        max_length=limits.max_type_length,
        setting="max_type_length",
        max_bytes=limits.max_type_bytes,
        bytes_setting="max_type_bytes",
    )


def check_lane(lane: object, limits: Limits = DEFAULT_LIMITS) -> str | None:
    return None if lane is None else check_name(lane, "lane name", limits)


def check_holder(holder: object, limits: Limits = DEFAULT_LIMITS) -> str:
    return check_name(holder, "claim holder", limits)


def check_error_text(error: object, limits: Limits = DEFAULT_LIMITS) -> str:
    """A failure's error text; never refused for its content: long tracebacks are cut to
    the limit, NUL and lone surrogates (which PostgreSQL cannot store) are escaped."""
    if not isinstance(error, str):
        raise invalid(f"error must be a str, not {type_name(error)}")
    # Escapes only lengthen, so the first max_error_length characters are all it needs.
    text = error[: limits.max_error_length].replace("\x00", "\\u0000")
    text = text.encode("utf-8", "backslashreplace").decode()
    return text[: limits.max_error_length]


def check_error_filter(value: object, limits: Limits = DEFAULT_LIMITS) -> str:
    """Text to find in errors: no longer than the errors kept (``Limits.max_error_length``)."""
    return check_text(
        value,
        "error filter",
        max_length=limits.max_error_length,
        setting="max_error_length",
        max_bytes=4 * limits.max_error_length,  # never reached: 4 bytes a character at most
        bytes_setting="max_error_length",
    )


def check_redrive_action(action: object) -> str:
    if not isinstance(action, str) or action not in REDRIVE_ACTIONS:
        raise invalid(f"redrive action must be 'retry' or 'skip', got {show(action)}")
    return action


# -- numbers and times ----------------------------------------------------------------


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"{what} must be an int, not {type_name(value)}")
    return int(value)


def check_index(value: object, what: str = "index") -> int:
    """An event index: an ``int`` (not a ``bool``) in [1, MAX_INDEX]."""
    index = _int(value, what)
    if not 1 <= index <= MAX_INDEX:
        raise invalid(f"{what} must be between 1 and {MAX_INDEX}, got {show(index)}")
    return index


def check_attempt(value: object, what: str = "attempt") -> int:
    """An attempt number: an ``int`` in [1, MAX_ATTEMPT]."""
    attempt = _int(value, what)
    if not 1 <= attempt <= MAX_ATTEMPT:
        raise invalid(f"{what} must be between 1 and {MAX_ATTEMPT}, got {show(attempt)}")
    return attempt


def check_optional_bound(value: object, what: str) -> int | None:
    """An optional bound on indexes (``after``, ``through``, ``if_last_index``, a read's
    ``limit``): None or an ``int`` in [0, MAX_INDEX]; larger bounds are refused, not clamped."""
    if value is None:
        return None
    bound = _int(value, what)
    if not 0 <= bound <= MAX_INDEX:
        raise invalid(f"{what} must be between 0 and {MAX_INDEX}, got {show(bound)}")
    return bound


def check_count(value: object, what: str, *, maximum: int, setting: str | None = None) -> int:
    """An ``int`` count in [1, maximum] (``maximum`` is ``Limits.<setting>`` when named)."""
    count = _int(value, what)
    if not 1 <= count <= maximum:
        bound = f"Limits.{setting}={maximum}" if setting else f"{maximum}"
        raise invalid(f"{what} must be between 1 and {bound}, got {show(count)}")
    return count


def check_natural(value: object, what: str, *, maximum: int) -> int:
    """An ``int`` in [0, maximum]: a pid, a count of things in flight or done."""
    number = _int(value, what)
    if not 0 <= number <= maximum:
        raise invalid(f"{what} must be between 0 and {maximum}, got {show(number)}")
    return number


def check_max_failures(value: object) -> int:
    return check_count(value, "max_failures", maximum=MAX_ATTEMPT)


def check_seconds(value: object, what: str, limits: Limits = DEFAULT_LIMITS) -> float:
    """A duration: a finite number of seconds above zero, at most ``Limits.max_seconds``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"{what} must be a number of seconds, not {type_name(value)}")
    limit = limits.max_seconds
    # Compared before float(): float(10**400) raises OverflowError.
    if not (value > 0 and value <= limit):  # false for NaN too
        raise invalid(
            f"{what} must be above 0 and at most Limits.max_seconds={limit}, got {show(value)}"
        )
    return float(value)


def check_time(value: object, what: str) -> datetime:
    """An aware ``datetime`` in [EARLIEST_TIME, LATEST_TIME), returned in UTC."""
    if not isinstance(value, datetime):
        raise invalid(f"{what} must be an aware datetime, not {type_name(value)}")
    try:
        if value.utcoffset() is None:
            raise invalid(f"{what} must be an aware datetime, not a naive one")
        moment = value.astimezone(UTC)
    except (OverflowError, ValueError, TypeError):  # year 1 or 9999 moved out of range
        moment = None
    if moment is None or not EARLIEST_TIME <= moment < LATEST_TIME:
        raise invalid(
            f"{what} must be from {EARLIEST_TIME:%Y-%m-%d} to before {LATEST_TIME:%Y-%m-%d} "
            f"UTC, got {show(value)}"
        )
    return moment
