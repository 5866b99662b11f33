"""The model's small universe: few sessions, consumers, types and ids, so work collides.

Small on purpose: with two sessions, four consumers, three event types and a handful
of ids, random steps replay ids, conflict, supersede attempts and clear under live work
within a few dozen steps. Strategies draw only from these names.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypeVar

from hypothesis import strategies as st

from a2pg import Consumer, LogSpec, NewEvent, Target
from a2pg.models import JSON

T = TypeVar("T")

START = datetime(2026, 1, 1, tzinfo=UTC)
"""Where the shared clock starts every example."""

SESSIONS = ("a", "b")
"""The sessions the model writes to; each is observed after every step."""
NOWHERE = "z"
"""A session nobody writes to: calls on it must answer without creating it."""

TYPES = ("t1", "t2", "t3")
EVENT_IDS = ("e1", "e2", "e3")
RETURN_IDS = ("r1", "r2", "r3", "r4", "r5", "r6", "e1")
"""Ids of events completions return: mostly their own, sometimes one an append uses."""
HOLDERS = ("h1", "h2")
REDUCERS = ("r1", "r2")
NAMESPACE = "ns"
PARTICIPANTS = ("p1", "p2")
FIELDS = ("f1", "f2")

JOB = "job"
"""Targeted alone: one event cursor per event."""
LANE = "ln"
"""Targeted on lanes ``x`` and ``y``: FIFO lane cursors (rarely also alone)."""
AUDIT = "audit"
"""A log consumer with types; declared and registered with either of two type sets."""
FEED = "feed"
"""A log consumer of every type, with backfill."""

AUDIT_12 = Consumer(AUDIT, LogSpec(types=("t1", "t2")))
AUDIT_23 = Consumer(AUDIT, LogSpec(types=("t2", "t3")))
AUDIT_LISTED = Consumer(AUDIT, LogSpec(types=["t1", "t2"]))  # type: ignore[arg-type]
"""Types given as a list, as callers do although the field says tuple."""
FEED_ALL = Consumer(FEED, LogSpec(backfill=True))
LOG_CONSUMERS = (AUDIT_12, AUDIT_23, AUDIT_LISTED, FEED_ALL)
WAKE_LOG_CONSUMERS = (*LOG_CONSUMERS, Consumer(LANE, LogSpec(lane="x")), Consumer(JOB))
"""What ``wake_log`` is asked about: the log consumers, a targeted lane, a non-log consumer."""

TARGET_LISTS: tuple[tuple[Target, ...], ...] = (
    (Target(JOB),),
    (Target(LANE, "x"),),
    (Target(LANE, "y"),),
    (Target(JOB), Target(LANE, "x")),
    (Target(LANE, "x"), Target(LANE, "y")),
    (),
    (Target(LANE), Target(LANE, "x")),
    (Target(AUDIT),),
)
"""The targets of an event: mostly the usual ones; ``ln`` alone and on a lane at once, and
``audit`` (a log consumer, so refused where it is declared), now and then."""

DECLARED: tuple[list[Consumer] | None, ...] = (
    None,
    [],
    [AUDIT_12],
    [AUDIT_23],
    [FEED_ALL],
    [AUDIT_12, FEED_ALL],
    [AUDIT_LISTED],
    [Consumer(JOB)],
)
"""``consumers=`` choices: the registry (None), nobody, or explicit declarations."""
SERVED: tuple[list[Consumer] | None, ...] = (
    None,
    [Consumer(JOB)],
    [Consumer(LANE)],
    [AUDIT_12, FEED_ALL],
    [Consumer(JOB), Consumer(LANE), AUDIT_23],
    [],
)
"""``consumers=`` choices of claims: whose heads a claimer serves."""
REGISTRATIONS: tuple[list[Consumer], ...] = (
    [AUDIT_12],
    [AUDIT_23],
    [FEED_ALL],
    [AUDIT_12, FEED_ALL],
    [AUDIT_LISTED],
    [Consumer(JOB), AUDIT_23],
)
UNREGISTRATIONS: tuple[list[str], ...] = ([AUDIT], [FEED], [AUDIT, FEED], [], [JOB])
PAUSES: tuple[list[str], ...] = ([JOB], [LANE], [AUDIT], [JOB, LANE, AUDIT, FEED], ["nobody"])
"""Who is paused or resumed: one targeted or log consumer, all four, a name with no work."""

PROCESSES = (("box", 1), ("box", 2), ("other", 1))
"""A worker's host and pid: a holder beating from another process starts its row again."""
FORGETS: tuple[list[str], ...] = ([HOLDERS[0]], [HOLDERS[1]], list(HOLDERS), [], ["h3"])
ERROR_FILTERS = (None, "boom", "BANG", "b", "x")
"""``find_dead_letters``' error filters: the failures' errors (``boom``, ``bang``), in
another case, a letter both hold, one neither does."""

PAYLOADS: st.SearchStrategy[JSON] = st.sampled_from([None, 1, "x", {"n": 1}, [1, 2]])
sessions = st.sampled_from(SESSIONS)
any_session = st.sampled_from((*SESSIONS, *SESSIONS, NOWHERE))
holders = st.sampled_from(HOLDERS)
ttls = st.sampled_from((30.0, 10.0))
max_failures = st.sampled_from((None, 3, 1, 2))
picks = st.integers(min_value=0, max_value=63)
"""Which remembered attempt (or head) a step names, modulo how many there are; 0 is the
most recent, so current attempts come up more often than stale ones."""
deltas = st.sampled_from((0, 0, 0, -1, 1))
"""Added to a remembered attempt number: current, stale or not yet reached."""

target_lists = st.sampled_from(TARGET_LISTS)


def sometimes(strategy: st.SearchStrategy[T], one_in: int) -> st.SearchStrategy[T | None]:
    """None, or about one time in ``one_in`` a value of ``strategy`` (shrinks to None)."""
    return st.integers(0, one_in - 1).flatmap(lambda n: strategy if n == one_in - 1 else st.none())


new_events = st.builds(
    NewEvent,
    type=st.sampled_from(TYPES),
    payload=PAYLOADS,
    id=st.one_of(st.none(), st.sampled_from(EVENT_IDS)),
    targets=target_lists,
)
events_with_ids = st.builds(
    NewEvent,
    type=st.sampled_from(TYPES),
    payload=PAYLOADS,
    id=st.sampled_from(EVENT_IDS),
    targets=target_lists,
)
returned_events = st.builds(
    NewEvent,
    type=st.sampled_from(TYPES),
    payload=PAYLOADS,
    id=st.sampled_from(RETURN_IDS),
    targets=target_lists,
)
causes = sometimes(st.tuples(picks, deltas), 4)
"""Mostly no cause; sometimes a remembered attempt (current, stale or not reached yet)."""
declared = st.sampled_from(DECLARED)
served = st.sampled_from(SERVED)
CompletionSpec = tuple[tuple[int, int], list[NewEvent], list[Consumer] | None]
"""A completion to build: which remembered attempt (and shift), the events it returns, and
the consumers it declares."""
completions: st.SearchStrategy[CompletionSpec] = st.tuples(
    st.tuples(picks, deltas), st.lists(returned_events, max_size=2), declared
)
batches = st.lists(completions, min_size=1, max_size=3)
"""``complete_attempts`` batches (an empty one is a conformance test's business)."""
