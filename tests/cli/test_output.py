"""Tables and JSON: alignment, empty listings, blocked lanes, event lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from a2pg.cli.output import (
    CURSOR_COLUMNS,
    cursor_json,
    cursor_rows,
    dead_letter_json,
    dead_letter_row,
    dumps,
    event_line,
    render_table,
    to_jsonable,
)
from a2pg.models import Cause, Cursor, Dispatch, Head, StoredEvent

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def event(index: int = 3, cause: Cause | None = None) -> StoredEvent:
    return StoredEvent("e1", "chat.user", {"text": "hi"}, index, "s1", NOW, cause)


def test_table_aligns_numbers_right_and_text_left() -> None:
    rows = [{"name": "a", "n": 5}, {"name": "longer", "n": 1234}]
    text = render_table(("name", "n"), rows, empty="nothing")
    lines = text.splitlines()
    assert lines[0].split() == ["NAME", "N"]
    assert lines[2] == "a          5"
    assert lines[3] == "longer  1234"
    assert len({len(line) for line in lines[1:]}) == 1


def test_empty_table_says_so() -> None:
    assert render_table(("a",), [], empty="no sessions") == "no sessions\n"


def test_json_converts_dataclasses_and_times() -> None:
    data = to_jsonable(event(cause=Cause("c", "l", 2, 1)))
    assert data["created_at"] == "2026-01-01T12:00:00+00:00"
    assert data["cause"] == {"consumer": "c", "lane": "l", "index": 2, "attempt": 1}
    assert json.loads(dumps([event()]))[0]["payload"] == {"text": "hi"}


def cursor(kind: str, *, failed: bool = False, held: bool = False, head: int | None = 4) -> Cursor:
    dispatch = Dispatch(
        attempt_count=2,
        claim_holder="w1" if held else None,
        claim_expires_at=NOW + timedelta(seconds=30) if held else None,
        failure_count=3 if failed else 0,
        failed_at=NOW if failed else None,
        last_error="Traceback (most recent call last):\nValueError: boom" if failed else None,
    )
    lane = None if kind == "event" else "turns"
    return Cursor("reply", lane, kind, 3, head, dispatch)  # type: ignore[arg-type]


def test_cursor_states_make_blocked_lanes_obvious() -> None:
    assert cursor("lane", failed=True).state(NOW) == "BLOCKED"
    assert cursor("log", failed=True).state(NOW) == "BLOCKED"
    assert cursor("event", failed=True).state(NOW) == "dead-letter"
    assert cursor("lane", held=True).state(NOW) == "held"
    assert cursor("lane").state(NOW) == "ready"
    assert cursor("lane", head=None).state(NOW) == "idle"
    backing_off = Cursor("c", None, "event", 0, 1, Dispatch(claim_expires_at=NOW + timedelta(1)))
    assert backing_off.state(NOW) == "backoff"


def test_cursor_rows_and_json() -> None:
    rows = cursor_rows([cursor("lane", failed=True)], NOW)
    assert set(CURSOR_COLUMNS) <= set(rows[0])
    assert rows[0]["state"] == "BLOCKED"
    data = cursor_json(cursor("lane", failed=True), NOW)
    assert data["blocked"] is True
    assert data["dead_lettered"] is True
    assert data["dispatch"]["failure_count"] == 3


def test_dead_letter_rows_mark_lane_heads_blocked() -> None:
    lane_head = Head(event(), "reply", "turns", Dispatch(failure_count=4, failed_at=NOW))
    event_head = Head(event(), "moderate", None, Dispatch(failure_count=4, failed_at=NOW))
    assert dead_letter_row(lane_head)["state"] == "BLOCKED"
    assert dead_letter_row(event_head)["state"] == "dead-letter"
    assert dead_letter_json(lane_head)["blocked"] is True
    assert dead_letter_json(event_head)["blocked"] is False


def test_event_line_shows_index_type_cause_and_payload() -> None:
    line = event_line(event(7, Cause("reply", "turns", 3, 2)))
    assert line.split()[0] == "7"
    assert "chat.user <- reply/turns@3#2" in line
    assert line.endswith('{"text":"hi"}')


def test_error_line_is_the_last_line_of_a_traceback() -> None:
    from a2pg import Dispatch

    def error_line(error: str | None) -> str:
        return Dispatch(last_error=error).error_line()

    assert error_line("Traceback (most recent call last):\n  File x\nValueError: boom\n") == (
        "ValueError: boom"
    )
    assert error_line(None) == ""
    assert len(error_line("x" * 500)) == 80
