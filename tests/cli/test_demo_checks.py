"""The demo's verification catches what it claims to: missing, duplicate and reordered work."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from a2pg.demo.checks import (
    AUDIT,
    AUDIT_CONSUMER,
    AUDIT_LANE,
    MODERATE_CONSUMER,
    REPLY,
    REPLY_CONSUMER,
    REPLY_LANE,
    USER,
    VERDICT,
    PoisonReport,
    Tally,
    checks,
    flaky,
    tally_session,
)
from a2pg.models import Cause, StoredEvent

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def session_log(turns: int, *, poison_turn: int | None = None) -> list[StoredEvent]:
    """A log as the demo's workers would leave it, every unit done once and in order."""
    events: list[StoredEvent] = []

    def add(type_: str, payload: dict[str, object], cause: Cause | None = None) -> StoredEvent:
        stored = StoredEvent(f"e{len(events)}", type_, payload, len(events) + 1, "s", NOW, cause)
        events.append(stored)
        return stored

    for turn in range(1, turns + 1):
        user = add(USER, {"turn": turn, "text": "t", "poison": turn == poison_turn})
        add(VERDICT, {"attempt": 1, "failures": 0}, Cause(MODERATE_CONSUMER, None, user.index, 1))
        add(AUDIT, {"attempt": 1, "failures": 0}, Cause(AUDIT_CONSUMER, AUDIT_LANE, user.index, 1))
        if turn != poison_turn:
            reply = add(
                REPLY,
                {"attempt": 1, "failures": 0},
                Cause(REPLY_CONSUMER, REPLY_LANE, user.index, 1),
            )
            add(
                AUDIT,
                {"attempt": 1, "failures": 0},
                Cause(AUDIT_CONSUMER, AUDIT_LANE, reply.index, 1),
            )
    return events


def verdicts(events: list[StoredEvent]) -> dict[str, bool]:
    tally = Tally()
    tally_session(tally, "s", events)
    poison = PoisonReport("s", 1, True, True, 4, True, True, "poison")
    return {c.name: c.ok for c in checks(tally, poison=poison)}


def test_a_clean_log_counts_every_unit_once() -> None:
    tally = Tally()
    tally_session(tally, "s", session_log(5, poison_turn=2))
    assert tally.units_expected == tally.units_done == 5 * 4 - 2
    assert not (tally.missing or tally.duplicated or tally.unexpected)
    assert verdicts(session_log(5))["exactly once"]
    assert verdicts(session_log(5))["order"]


def test_a_duplicate_completion_fails_exactly_once() -> None:
    events = session_log(3)
    dup = replace(events[1], id="dup", index=len(events) + 1)
    assert not verdicts([*events, dup])["exactly once"]


def test_a_missing_completion_fails_exactly_once() -> None:
    events = [e for e in session_log(3) if e.type != VERDICT or e.index != 2]
    assert not verdicts(events)["exactly once"]


def test_a_reply_for_the_poison_is_unexpected() -> None:
    events = session_log(3, poison_turn=2)
    poison_index = next(e.index for e in events if e.type == USER and e.payload["poison"])
    extra = StoredEvent(
        "x", REPLY, {}, 99, "s", NOW, Cause(REPLY_CONSUMER, REPLY_LANE, poison_index, 5)
    )
    assert not verdicts([*events, extra])["exactly once"]


def test_replies_out_of_turn_order_fail_the_order_check() -> None:
    events = session_log(3)
    replies = [i for i, e in enumerate(events) if e.type == REPLY]
    a, b = replies[0], replies[1]
    swapped = list(events)
    swapped[a] = replace(events[a], cause=events[b].cause)
    swapped[b] = replace(events[b], cause=events[a].cause)
    assert not verdicts(swapped)["order"]


def test_flaky_attempts_are_deterministic_and_about_ten_percent() -> None:
    firsts = [flaky(f"s{i}", "c", i, 1) for i in range(4000)]
    assert firsts == [flaky(f"s{i}", "c", i, 1) for i in range(4000)]
    assert 0.08 < sum(firsts) / len(firsts) < 0.12
    assert not any(flaky(f"s{i}", "c", i, 3) for i in range(4000))


def test_an_unretried_flaky_head_fails_the_retry_check() -> None:
    units = [(MODERATE_CONSUMER, 1), (AUDIT_CONSUMER, 1), (REPLY_CONSUMER, 1), (AUDIT_CONSUMER, 4)]

    def only_moderation_flaky(session: str) -> bool:
        return [flaky(session, c, i, 1) for c, i in units] == [True, False, False, False]

    session = next(f"s{i}" for i in range(10_000) if only_moderation_flaky(f"s{i}"))
    events = [replace(e, session_id=session) for e in session_log(1)]
    tally = Tally()
    tally_session(tally, session, events)
    assert tally.flaky_expected == 1
    assert tally.flaky_not_retried  # its result says attempt 1, which was meant to fail
    fixed = [
        replace(e, payload={"attempt": 2, "failures": 1}) if e.type == VERDICT else e
        for e in events
    ]
    tally = Tally()
    tally_session(tally, session, fixed)
    assert not tally.flaky_not_retried
    assert tally.retries == 1


def test_flaky_attempts_do_not_depend_on_the_run_id() -> None:
    for n in range(200):
        a = flaky(f"demo-aaaa-{n:04d}", "c", 3, 1)
        assert a == flaky(f"demo-bbbb-{n:04d}", "c", 3, 1)
