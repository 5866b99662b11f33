"""What ``a2pg demo`` verifies after its workers drained the workload, from the event log alone."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..models import StoredEvent

USER = "chat.user"
REPLY = "chat.reply"
VERDICT = "moderation.verdict"
AUDIT = "audit.noted"

REPLY_CONSUMER = "demo-reply"
REPLY_LANE = "turns"
MODERATE_CONSUMER = "demo-moderate"
AUDIT_CONSUMER = "demo-audit"
AUDIT_LANE = "log"

FLAKY_PER_MILLE = 100
"""About 10% of attempts fail transiently..."""
FLAKY_ATTEMPTS = 2
"""...but only the first two of a head, so retries always get through before max_failures."""

Unit = tuple[str, str | None, int]
"""One piece of consumer work: (consumer, lane, index of the event it processed)."""


def flaky(session_id: str, consumer: str, index: int, attempt: int) -> bool:
    """Whether this attempt fails on purpose: by hash, so every run fails the same attempts.

    Keyed on the session's number (what follows its last ``-``), not on the run id in
    its name, so two runs of the same workload fail exactly the same attempts.
    """
    if attempt > FLAKY_ATTEMPTS:
        return False
    number = session_id.rsplit("-", 1)[-1]
    key = f"{number}|{consumer}|{index}|{attempt}".encode()
    digest = hashlib.blake2b(key, digest_size=4).digest()
    return int.from_bytes(digest) % 1000 < FLAKY_PER_MILLE


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(slots=True)
class Tally:
    """Counts gathered over every session, then judged by ``checks``."""

    sessions: int = 0
    units_expected: int = 0
    units_done: int = 0
    missing: list[tuple[str, Unit]] = field(default_factory=list)
    duplicated: list[tuple[str, Unit]] = field(default_factory=list)
    unexpected: list[tuple[str, Unit]] = field(default_factory=list)
    lanes: int = 0
    lanes_out_of_order: list[str] = field(default_factory=list)
    logs_out_of_order: list[str] = field(default_factory=list)
    flaky_expected: int = 0
    flaky_not_retried: list[tuple[str, Unit]] = field(default_factory=list)
    retries: int = 0
    poison_replied: bool = False


def expected_units(events: Sequence[StoredEvent]) -> set[Unit]:
    """The work the demo's consumers owe for one session's log."""
    units: set[Unit] = set()
    for event in events:
        if event.type == USER:
            units.add((MODERATE_CONSUMER, None, event.index))
            units.add((AUDIT_CONSUMER, AUDIT_LANE, event.index))
            if not _is_poison(event):
                units.add((REPLY_CONSUMER, REPLY_LANE, event.index))
        elif event.type == REPLY:
            units.add((AUDIT_CONSUMER, AUDIT_LANE, event.index))
    return units


def _is_poison(event: StoredEvent) -> bool:
    return isinstance(event.payload, dict) and bool(event.payload.get("poison"))


def _ascending(values: Sequence[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


def tally_session(tally: Tally, session_id: str, events: Sequence[StoredEvent]) -> None:
    """Adds one session's log to ``tally``: results counted by cause, orders, retries."""
    tally.sessions += 1
    expected = expected_units(events)
    results = [e for e in events if e.cause is not None]
    done = Counter((e.cause.consumer, e.cause.lane, e.cause.index) for e in results if e.cause)
    tally.units_expected += len(expected)
    tally.units_done += sum(1 for unit in done if unit in expected)
    tally.missing += [(session_id, u) for u in sorted(expected - done.keys(), key=str)]
    tally.duplicated += [(session_id, u) for u, n in done.items() if n > 1]
    tally.unexpected += [(session_id, u) for u in done if u not in expected]

    replies = [e for e in results if e.cause and e.cause.consumer == REPLY_CONSUMER]
    tally.lanes += 1 if replies else 0
    if not _ascending([e.cause.index for e in replies if e.cause]):
        tally.lanes_out_of_order.append(session_id)
    audits = [e for e in results if e.cause and e.cause.consumer == AUDIT_CONSUMER]
    if not _ascending([e.cause.index for e in audits if e.cause]):
        tally.logs_out_of_order.append(session_id)

    poison = {e.index for e in events if e.type == USER and _is_poison(e)}
    tally.poison_replied |= any(e.cause.index in poison for e in replies if e.cause)
    for event in results:
        cause = event.cause
        assert cause is not None
        payload = event.payload if isinstance(event.payload, dict) else {}
        tally.retries += int(payload.get("failures", 0))
        if flaky(session_id, cause.consumer, cause.index, 1):
            tally.flaky_expected += 1
            if int(payload.get("attempt", 0)) < 2:
                tally.flaky_not_retried.append(
                    (session_id, (cause.consumer, cause.lane, cause.index))
                )


def _sample(items: Sequence[tuple[str, Unit]]) -> str:
    shown = ", ".join(f"{s}:{c}/{lane or '-'}@{i}" for s, (c, lane, i) in items[:3])
    return shown + (" ..." if len(items) > 3 else "")


def checks(tally: Tally, *, poison: PoisonReport) -> list[Check]:
    """The verdicts the demo prints; any failing one makes it exit 1."""
    once_ok = not (tally.missing or tally.duplicated or tally.unexpected) and tally.units_done > 0
    once = (
        f"{tally.units_done:,} of {tally.units_expected:,} units completed once over "
        f"{tally.sessions} sessions (counted by cause)"
    )
    if not once_ok:
        once += (
            f"; missing {len(tally.missing)} {_sample(tally.missing)}"
            f"; duplicated {len(tally.duplicated)} {_sample(tally.duplicated)}"
            f"; unexpected {len(tally.unexpected)} {_sample(tally.unexpected)}"
        )
    order_bad = tally.lanes_out_of_order + tally.logs_out_of_order
    order = f"{tally.lanes} reply lanes and {tally.sessions} audit logs completed in index order"
    if order_bad:
        order += f"; out of order: {', '.join(order_bad[:5])}"
    flaky_ok = not tally.flaky_not_retried and tally.flaky_expected > 0
    flaky_text = (
        f"{tally.flaky_expected} heads failed on their first attempt and were retried to "
        f"completion ({tally.retries} failed attempts in all)"
    )
    if tally.flaky_not_retried:
        flaky_text += f"; not retried: {_sample(tally.flaky_not_retried)}"
    return [
        Check("exactly once", once_ok, once),
        Check("order", not order_bad, order),
        Check("transient failures retried", flaky_ok, flaky_text),
        Check(
            "poison dead-lettered",
            poison.dead_lettered and poison.blocked,
            poison.dead_letter_text,
        ),
        Check(
            "poison skipped by redrive",
            poison.redriven and not tally.poison_replied and poison.cleared,
            poison.redrive_text,
        ),
    ]


@dataclass(slots=True)
class PoisonReport:
    """What happened to the poison event: seen dead-lettered and blocking, then skipped."""

    session_id: str = ""
    index: int = 0
    dead_lettered: bool = False
    blocked: bool = False
    failures: int = 0
    redriven: bool = False
    cleared: bool = False
    error: str = ""

    @property
    def dead_letter_text(self) -> str:
        if not self.dead_lettered:
            return f"the poison event {self.session_id}@{self.index} was never dead-lettered"
        lane = "its lane BLOCKED behind it" if self.blocked else "its lane NOT shown as blocked"
        return (
            f"{self.session_id} {REPLY_CONSUMER}/{REPLY_LANE}@{self.index} dead-lettered after "
            f"{self.failures} failures, {lane} ({self.error})"
        )

    @property
    def redrive_text(self) -> str:
        if not self.redriven:
            return "redrive --skip did not apply"
        after = "no dead letters left" if self.cleared else "dead letters remain"
        return f"redriven with skip; the later turns of its lane were then replied; {after}"
