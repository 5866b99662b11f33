"""How the CLI shows results: aligned text tables for people, ``--json`` for scripts."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from ..models import Cursor, Head, SessionInfo, StoredEvent

Row = Mapping[str, Any]


def to_jsonable(value: Any) -> Any:
    """Dataclasses to dicts and datetimes to ISO-8601 text, recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """One compact JSON document (no NaN: results must parse anywhere)."""
    return json.dumps(to_jsonable(value), separators=(",", ":"), allow_nan=False)


def write_json(out: TextIO, value: Any) -> None:
    out.write(json.dumps(to_jsonable(value), indent=2, allow_nan=False) + "\n")


def cell(value: Any) -> str:
    """A table cell: empty for None, short UTC times, plain text otherwise."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def render_table(columns: Sequence[str], rows: Sequence[Row], *, empty: str) -> str:
    """Aligned columns; numbers right-aligned; ``empty`` when there are no rows."""
    if not rows:
        return empty + "\n"
    texts = [[cell(row.get(c)) for c in columns] for row in rows]
    numeric = [
        all(
            isinstance(row.get(c), int | float) and not isinstance(row.get(c), bool) for row in rows
        )
        for c in columns
    ]
    widths = [max(len(c), *(len(t[i]) for t in texts)) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    header = line([c.upper().replace("_", " ") for c in columns])
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([header, rule, *(line(t) for t in texts)]) + "\n"


def session_rows(sessions: Sequence[SessionInfo]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(s) for s in sessions]


SESSION_COLUMNS = (
    "session_id",
    "head",
    "clear_index",
    "pending",
    "blocked",
    "dead_letters",
    "last_event_at",
)
"""``blocked``: events held behind a dead-lettered lane head (not in ``pending``)."""


def cursor_rows(cursors: Sequence[Cursor], now: datetime) -> list[dict[str, Any]]:
    return [
        {
            "consumer": c.consumer,
            "lane": c.lane,
            "kind": c.kind,
            "position": c.position,
            "head": c.head,
            "state": c.state(now),
            "attempts": c.dispatch.attempt_count,
            "failures": c.dispatch.failure_count,
            "holder": c.dispatch.claim_holder,
            "expires_at": c.dispatch.claim_expires_at,
            "last_error": c.dispatch.last_error,
        }
        for c in cursors
    ]


CURSOR_COLUMNS = (
    "consumer",
    "lane",
    "kind",
    "position",
    "head",
    "state",
    "attempts",
    "failures",
    "holder",
    "expires_at",
)


def cursor_json(cursor: Cursor, now: datetime) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(cursor)
    data["dead_lettered"] = cursor.dead_lettered
    data["blocked"] = cursor.blocked
    data["state"] = cursor.state(now)
    return data


def dead_letter_row(head: Head) -> dict[str, Any]:
    """A dead-lettered head; a lane or log head blocks every later event of its cursor."""
    return {
        "session_id": head.session_id,
        "consumer": head.consumer,
        "lane": head.lane,
        "index": head.index,
        "type": head.event.type,
        "state": "BLOCKED" if head.lane is not None else "dead-letter",
        "failures": head.failure_count,
        "failed_at": head.dispatch.failed_at,
        "last_error": head.dispatch.error_line(),
    }


DEAD_LETTER_COLUMNS = (
    "session_id",
    "consumer",
    "lane",
    "index",
    "type",
    "state",
    "failures",
    "failed_at",
    "last_error",
)


def dead_letter_json(head: Head) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(head)
    data["blocked"] = head.lane is not None
    return data


def event_line(event: StoredEvent) -> str:
    """One event per line for ``tail``: index, time, type, cause, payload."""
    cause = ""
    if event.cause is not None:
        c = event.cause
        lane = f"/{c.lane}" if c.lane is not None else ""
        cause = f" <- {c.consumer}{lane}@{c.index}#{c.attempt}"
    payload = json.dumps(event.payload, separators=(",", ":"))
    if len(payload) > 200:
        payload = payload[:197] + "..."
    return f"{event.index:>6}  {cell(event.created_at)}  {event.type}{cause}  {payload}"


def load(values: Sequence[float] | None) -> str:
    """A load average's 1-minute figure as a bench report gives it."""
    return f"{values[0]:.2f}" if values else "unknown"


def write_outcome(stdout: TextIO, data: Mapping[str, Any]) -> None:
    """A bench report's last lines: how many targets were met, and each failed check."""
    met = [t for t in data["targets"] if t["met"]]
    stdout.write(f"targets met: {len(met)} of {len(data['targets'])}\n")
    for check in data["checks"]:
        if not check["ok"]:
            stdout.write(f"FAIL {check['name']}: {check['detail']}\n")


def write_report(
    stdout: TextIO,
    data: dict[str, Any],
    *,
    as_json: bool,
    table: Callable[[TextIO, dict[str, Any]], None],
) -> bool:
    """A bench report as JSON or as its table; whether every correctness check passed
    (targets are reported, never enforced: only a failed check fails the command)."""
    if as_json:
        write_json(stdout, data)
    else:
        table(stdout, data)
    return bool(data["ok"])
