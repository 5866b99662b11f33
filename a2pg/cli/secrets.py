"""Keeps a DSN's password out of everything a command logs or prints, whoever writes it."""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from ..postgres import dsn as dsns

Hide = Callable[[str], str]


def hider(dsn: str | None) -> Hide:
    """What hides ``dsn``'s password in a text (nothing to hide: the text as it is)."""
    return dsns.scrubber(dsn)


@contextlib.contextmanager
def scrubbed_logs(dsn: str | None) -> Iterator[None]:
    """While the block runs, every log record (a2pg's, psycopg's, the pool's, Alembic's)
    is made with ``dsn``'s password hidden in its message and traceback.

    It hooks record creation rather than a handler, so it covers handlers added later
    and by others too (a test's log capture, an application's logging config).
    """
    if not dsn or dsns.password_of(dsn) is None:
        yield
        return
    hide = dsns.scrubber(dsn)
    previous = logging.getLogRecordFactory()

    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _scrub(record, hide)
        return record

    logging.setLogRecordFactory(make)
    try:
        yield
    finally:
        logging.setLogRecordFactory(previous)


def scrubbed_traceback(exc: BaseException, dsn: str | None) -> str:
    """``exc``'s traceback as text, ``dsn``'s password hidden."""
    return dsns.scrub("".join(traceback.format_exception(exc)), dsn)


def _scrub(record: logging.LogRecord, hide: Hide) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed call: logging reports it itself when it formats
        return
    clean = hide(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        clean = hide(text)
        if clean != text:
            record.exc_text = clean
    if record.stack_info:
        record.stack_info = hide(record.stack_info)
