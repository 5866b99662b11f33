"""Log formats for ``a2pg worker --log-format``: one JSON object per line, or plain text.

JSON lines have stable keys: ``ts`` (UTC, ISO 8601 with milliseconds), ``level``,
``logger``, ``msg``; then, when the record carries them (every worker line about one head
or attempt does, through ``extra=``: ``a2pg.worker.attempt_log.fields``),
``session_id``, ``consumer``, ``lane``, ``index``, ``attempt``, ``error`` (one line, or
null), ``outcome`` and ``duration`` (seconds), and ``session`` (``session_id`` again, for
queries older than it); ``exc`` holds a traceback when there is one.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

FIELDS = (
    *("session_id", "consumer", "lane", "index", "attempt", "error"),
    *("outcome", "duration", "session"),
)
"""Record attributes a JSON line carries when present, in this order."""


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object on one line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in FIELDS:
            if key in record.__dict__:
                line[key] = record.__dict__[key]
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def _timestamp(created: float) -> str:
    moment = datetime.fromtimestamp(created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def formatter(log_format: LogFormat) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter()
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")


def configure_logging(level: str, log_format: LogFormat, stream: TextIO) -> None:
    """Sends every log record at ``level`` and above to ``stream`` in ``log_format``, unless
    logging is configured already (as ``logging.basicConfig`` does)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter(log_format))
    logging.basicConfig(level=level.upper(), handlers=[handler])
