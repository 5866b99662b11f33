"""Hypothesis strategies for the hostile-input suite: one per parameter kind, one per operation.

Each parameter is drawn mostly from values that make sense against the suite's seeded
store (so calls also succeed and move state), else from boundary values (every limit
and one past it, 2**31, 2**63, huge and non-finite floats, negative zero, lone
surrogates, NUL, 4-byte characters, deep nesting), wrong types and garbage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from a2pg import (
    AttemptRef,
    ClaimRef,
    Completion,
    Consumer,
    DeadLetterKey,
    DeadLetterQuery,
    Limits,
    LogSpec,
    NewEvent,
    SnapshotWrite,
    Target,
    WorkerBeat,
)
from a2pg.contract.limits import EARLIEST_TIME, LATEST_TIME, MAX_ATTEMPT, MAX_INDEX
from a2pg.contract.render import show
from a2pg.models import AUDIT_ACTIONS, WORK_STATES, AuditEntry, HeadKey, HeadQuery
from a2pg.store import Store

LIMITS = Limits(
    max_json_depth=12,
    max_payload_bytes=2_048,
    max_state_bytes=2_048,
    max_presence_value_bytes=256,
    max_batch_events=6,
    max_call_events=10,
    max_call_bytes=6_144,
    max_targets=6,
    max_completions=4,
    max_snapshot_writes=3,
    max_pins=4,
    max_presence_fields=4,
    max_log_types=4,
    max_consumers=4,
    max_claims=4,
    max_claim_limit=8,
    max_page_size=100,
    max_error_length=64,
    max_seconds=3_600.0,
)
"""Small counts and sizes, so every limit and one past it is cheap to reach; the text
limits keep their defaults, so maximal names also test PostgreSQL's index keys."""

NOW = datetime(2026, 1, 1, tzinfo=UTC)
OMIT = object()
"""A keyword argument left out of the call (its default applies)."""

SESSIONS = ["s", "t", "u"]
CONSUMERS = ["c", "d", "audit", "e"]
LANES = [None, "x", "log", "y"]
TYPES = ["a", "b", "note"]
IDS = ["e1", "e2", "r1", "r2"]
NAMES = ["c", "d", "x", "audit", "w", "r", "room", "ann", "f"]

WIDE = "\U0001f600"
"""A 4-byte character: names of them reach the byte limits at a quarter of the characters."""


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def _cycle() -> list[Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    return loop


def _wide_cycle() -> list[Any]:
    loop: list[Any] = []
    loop.extend([loop] * 8)
    return loop


class Opaque:
    """An object with no meaning to the store."""

    def __repr__(self) -> str:
        return "Opaque()"


def _texts(max_length: int, max_bytes: int) -> list[Any]:
    """Texts at and past a character and a byte limit, and the characters PostgreSQL refuses."""
    wide = max_bytes // 4
    return [
        "",
        "\x00",
        "a\x00b",
        "\ud800",
        "a\udfffb",
        " ",
        "\n",
        "\uffff",
        "a2.cleared",
        "x" * max_length,
        "x" * (max_length + 1),
        WIDE * wide,
        WIDE * (wide + 1),
        "é" * (max_bytes // 2),
        "é" * (max_bytes // 2 + 1),
    ]


GARBAGE: list[Any] = [
    None,
    0,
    1,
    -1,
    True,
    False,
    1.5,
    math.nan,
    b"s",
    bytearray(b"s"),
    [],
    ["s"],
    {},
    {"s": 1},
    ("s",),
    Opaque(),
    frozenset({"s"}),
    Decimal(1),
    NOW,
    range(3),
]

INTS: list[Any] = [
    0,
    -1,
    2,
    MAX_ATTEMPT,
    MAX_ATTEMPT + 1,
    MAX_INDEX,
    MAX_INDEX + 1,
    2**64,
    -(2**63),
    10**30,
    10**400,
    True,
    False,
    1.0,
    "1",
    None,
    math.inf,
    Decimal(1),
]

SECONDS: list[Any] = [
    0,
    0.0,
    -0.0,
    -1,
    math.nan,
    math.inf,
    -math.inf,
    5e-324,
    1e-300,
    1e-7,
    LIMITS.max_seconds,
    math.nextafter(LIMITS.max_seconds, math.inf),
    LIMITS.max_seconds + 1,
    3e11,
    1e308,
    10**400,
    True,
    "30",
    None,
    [30],
    Decimal(30),
]

TIMES: list[Any] = [
    datetime(2026, 1, 1),
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
    datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14))),
    datetime.min.replace(tzinfo=UTC),
    datetime.max.replace(tzinfo=UTC),
    EARLIEST_TIME,
    EARLIEST_TIME - timedelta(microseconds=1),
    LATEST_TIME - timedelta(microseconds=1),
    LATEST_TIME,
    date(2026, 1, 1),
    "2026-01-01T00:00:00Z",
    0,
    None,
]

JSONS: list[Any] = [
    math.nan,
    math.inf,
    -math.inf,
    -0.0,
    5e-324,
    1e308,
    2**63,
    -(2**63) - 1,
    10**300,
    10**4400,
    _deep(LIMITS.max_json_depth),
    _deep(LIMITS.max_json_depth + 1),
    _deep(60),
    _cycle(),
    _wide_cycle(),
    {1: 2},
    {"a\x00": 1},
    {"\udfff": 1},
    "\x00",
    "a\ud800",
    "x" * (LIMITS.max_payload_bytes - 2),
    "x" * (LIMITS.max_payload_bytes - 1),
    "x" * (LIMITS.max_presence_value_bytes - 2),
    WIDE * (LIMITS.max_payload_bytes // 4),
    set(),
    b"x",
    Opaque(),
    (1, "two"),
    Decimal("1.5"),
    NOW,
    1j,
    {"k": [1, {"m": math.nan}]},
    [list(range(40)) for _ in range(40)],
]


def mix(valid: SearchStrategy[Any], *hostile: SearchStrategy[Any]) -> SearchStrategy[Any]:
    """Mostly ``valid``, else one of ``hostile`` (or garbage)."""
    bad = st.one_of(*hostile, st.sampled_from(GARBAGE))
    return st.integers(0, 9).flatmap(lambda n: valid if n < 6 else bad)


def optional(valid: SearchStrategy[Any], *hostile: SearchStrategy[Any]) -> SearchStrategy[Any]:
    """A keyword argument: left out, None, or ``mix(valid, *hostile)``."""
    return st.one_of(st.just(OMIT), st.none(), mix(valid, *hostile))


def text(pool: list[Any], max_length: int, max_bytes: int) -> SearchStrategy[Any]:
    return mix(
        st.sampled_from(pool), st.sampled_from(_texts(max_length, max_bytes)), st.text(max_size=6)
    )


session_id = text(SESSIONS, LIMITS.max_session_id_length, LIMITS.max_session_id_bytes)
name = text(NAMES, LIMITS.max_name_length, LIMITS.max_name_bytes)
consumer_name = text(CONSUMERS, LIMITS.max_name_length, LIMITS.max_name_bytes)
holder = text(["w", "v"], LIMITS.max_name_length, LIMITS.max_name_bytes)
event_type = text(TYPES, LIMITS.max_type_length, LIMITS.max_type_bytes)
event_id = text(IDS, LIMITS.max_id_length, LIMITS.max_id_bytes)
lane = st.one_of(st.sampled_from(LANES), text(["x"], LIMITS.max_name_length, LIMITS.max_name_bytes))
index = mix(st.integers(1, 5), st.sampled_from(INTS), st.integers())
attempt = mix(st.integers(1, 3), st.sampled_from(INTS))
bound = optional(st.integers(0, 6), st.sampled_from(INTS), st.integers())
count = mix(st.integers(1, 4), st.sampled_from(INTS))
seconds = mix(st.sampled_from([1e-3, 1, 30, 60.0]), st.sampled_from(SECONDS), st.floats())
moment = mix(
    st.sampled_from([NOW, NOW - timedelta(seconds=1), NOW + timedelta(seconds=1)]),
    st.sampled_from(TIMES),
    st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=14))])),
)
small_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
json_value = mix(small_json, st.sampled_from(JSONS))


def listing(item: SearchStrategy[Any], limit: int, valid_item: Any) -> SearchStrategy[Any]:
    """A list argument: a few items (tuple, list or set), or exactly ``limit`` or one more,
    or something that is not a list at all."""
    few = st.lists(item, max_size=3)
    return mix(
        st.one_of(few, few.map(tuple)),
        st.sampled_from([[valid_item] * limit, [valid_item] * (limit + 1), range(10**20)]),
        st.sampled_from([None, 0, "ab", b"ab", {"a": 1}, Opaque(), True]),
    )


MODEL_GARBAGE = st.sampled_from([None, 1, "c", ("c", None, 1), {"consumer": "c"}, Opaque()])

not_before = st.one_of(
    st.none(),
    moment,
    st.sampled_from([timedelta(0), timedelta(seconds=5), timedelta(seconds=-1), 5, "soon"]),
    st.timedeltas(),
)
target = mix(
    st.builds(Target, consumer_name, lane),
    MODEL_GARBAGE,
    st.builds(Target, consumer_name, lane, not_before),
)
claim_ref = mix(
    st.builds(ClaimRef, consumer_name, lane, index),
    MODEL_GARBAGE,
    st.builds(AttemptRef, consumer_name, lane, index, attempt),
)
attempt_ref = mix(
    st.builds(AttemptRef, consumer_name, lane, index, attempt),
    MODEL_GARBAGE,
    st.builds(ClaimRef, consumer_name, lane, index),
)
log_types = st.one_of(
    st.none(), listing(event_type, LIMITS.max_log_types, "a"), st.lists(event_type, max_size=2)
)
log_spec = mix(
    st.builds(
        LogSpec,
        text(["log", "l2"], LIMITS.max_name_length, LIMITS.max_name_bytes),
        log_types,
        mix(st.booleans(), st.sampled_from([1, 0, "yes"])),
    ),
    MODEL_GARBAGE,
)
consumer = mix(
    st.builds(Consumer, consumer_name, st.one_of(st.none(), log_spec)),
    MODEL_GARBAGE,
)
consumers = st.one_of(st.none(), listing(consumer, LIMITS.max_consumers, Consumer("c")))
new_event = mix(
    st.builds(
        NewEvent,
        event_type,
        json_value,
        st.one_of(st.none(), event_id),
        st.one_of(st.none(), attempt_ref),
        listing(target, LIMITS.max_targets, Target("c")),
    ),
    MODEL_GARBAGE,
)
returned_event = st.builds(
    NewEvent,
    event_type,
    json_value,
    event_id,
    st.none(),
    st.lists(target, max_size=2),
)
events = listing(new_event, LIMITS.max_batch_events, NewEvent("a"))
returned = listing(returned_event, LIMITS.max_batch_events, NewEvent("a", id="r"))
completion = mix(
    st.builds(Completion, session_id, consumer_name, lane, index, attempt, returned, consumers),
    MODEL_GARBAGE,
)
snapshot_write = mix(
    st.builds(
        SnapshotWrite,
        index,
        json_value,
        listing(claim_ref, LIMITS.max_pins, ClaimRef("c", None, 1)),
    ),
    MODEL_GARBAGE,
)
field_name = st.one_of(
    st.sampled_from(["f", "g"]),
    st.sampled_from(_texts(LIMITS.max_name_length, LIMITS.max_name_bytes)),
    st.sampled_from([1, None, b"f", ("f",), 1.5, True]),
)
"""Dict keys: hashable, so hostile only in value and type."""
presence_values = mix(
    st.dictionaries(field_name, json_value, max_size=3),
    st.sampled_from(
        [
            {f"f{n}": n for n in range(LIMITS.max_presence_fields + 1)},
            {"f": "x" * LIMITS.max_presence_value_bytes},
            [("f", 1)],
            {1: 1},
        ]
    ),
)
error_text = mix(
    st.text(max_size=20),
    st.sampled_from(["\x00", "\ud800", "x" * 10_000, WIDE * 100, "a\x00\udfff"]),
)


def one_hostile(
    valid: dict[str, SearchStrategy[Any]], hostile: dict[str, SearchStrategy[Any]]
) -> SearchStrategy[dict[str, Any]]:
    """Fields (or arguments) all drawn from ``valid`` but at most one, drawn from ``hostile``:
    a value that gets past every other check, so the hostile one meets its own (with a
    dozen fields, drawing each from ``mix`` would almost never let one through)."""
    return st.sampled_from([None, *hostile]).flatmap(
        lambda bad: st.fixed_dictionaries({**valid, **({} if bad is None else {bad: hostile[bad]})})
    )


def built(cls: Any, fields: SearchStrategy[dict[str, Any]]) -> SearchStrategy[Any]:
    return fields.map(lambda kwargs: cls(**kwargs))


dead_letter_key = mix(
    st.sampled_from(
        [
            DeadLetterKey("t", "c", "", 0),
            DeadLetterKey("t", "c", "", 1),
            DeadLetterKey("s", "c", "", 1),
        ]
    ),
    st.builds(
        DeadLetterKey,
        session_id,
        consumer_name,
        st.one_of(st.just(""), text(["x", "y"], LIMITS.max_name_length, LIMITS.max_name_bytes)),
        index,
    ),
    MODEL_GARBAGE,
    st.builds(ClaimRef, consumer_name, lane, index),
)
"""A page's end: the seeded dead letter's key and those around it, else hostile fields
(an empty lane names an event cursor) or another kind of object."""
dead_letter_query = mix(
    built(
        DeadLetterQuery,
        one_hostile(
            {
                "consumer": st.sampled_from([None, "c", "d"]),
                "error": st.sampled_from([None, "boom", "BOOM", "oO", "bang"]),
                "session_prefix": st.sampled_from([None, "t", "s"]),
                "after": st.one_of(st.none(), dead_letter_key),
                "limit": st.sampled_from([1, 2, 100]),
            },
            {
                "consumer": consumer_name,
                "error": text(
                    ["b", "a2", "\\u0000"], LIMITS.max_error_length, 4 * LIMITS.max_error_length
                ),
                "session_prefix": text(
                    ["", "T", "%", "_", "tt"],
                    LIMITS.max_session_id_length,
                    LIMITS.max_session_id_bytes,
                ),
                "after": dead_letter_key,
                "limit": mix(st.integers(1, LIMITS.max_page_size + 1), st.sampled_from(INTS)),
            },
        ),
    ),
    MODEL_GARBAGE,
    st.just(WorkerBeat("w", "box", 1, (), 1, NOW, 0, "1", 5.0)),
)
"""Filters matching the seeded dead letter (error ``boom`` of ``c`` in ``t``) or not, a
filter's case, the wildcards a LIKE would honour, text limits (an error filter's is
``max_error_length``), page sizes past ``max_page_size``; else not a query at all."""
head_key = mix(
    st.builds(
        HeadKey,
        st.sampled_from([NOW, NOW + timedelta(seconds=30), NOW - timedelta(days=1)]),
        st.sampled_from(["s", "t"]),
        st.integers(1, 3),
        st.sampled_from(["c", "d"]),
        st.sampled_from(["", "x"]),
    ),
    st.builds(
        HeadKey,
        moment,
        session_id,
        index,
        consumer_name,
        st.one_of(st.just(""), text(["x", "y"], LIMITS.max_name_length, LIMITS.max_name_bytes)),
    ),
    MODEL_GARBAGE,
    st.just(DeadLetterKey("s", "c", "", 1)),
)
"""A page's end: keys around the seeded heads (``s``'s lane head of ``d`` on ``x``, its held
head of ``c``), else hostile fields (bad times, an empty lane for an event cursor) or
another kind of object."""
head_query = mix(
    built(
        HeadQuery,
        one_hostile(
            {
                "state": st.sampled_from(WORK_STATES),
                "consumer": st.sampled_from([None, "c", "d"]),
                "event_type": st.sampled_from([None, "a", "b", "note"]),
                "error": st.sampled_from([None, "boom", "BOOM"]),
                "session_prefix": st.sampled_from([None, "s", "t"]),
                "after": st.one_of(st.none(), head_key),
                "limit": st.sampled_from([1, 2, 100]),
            },
            {
                "state": mix(
                    st.sampled_from(WORK_STATES),
                    st.sampled_from(["dead", "READY", "", "held ", "blocked"]),
                ),
                "consumer": consumer_name,
                "event_type": event_type,
                "error": text(
                    ["b", "a2", "\\u0000"], LIMITS.max_error_length, 4 * LIMITS.max_error_length
                ),
                "session_prefix": text(
                    ["", "T", "%", "_", "ss"],
                    LIMITS.max_session_id_length,
                    LIMITS.max_session_id_bytes,
                ),
                "after": head_key,
                "limit": mix(st.integers(1, LIMITS.max_page_size + 1), st.sampled_from(INTS)),
            },
        ),
    ),
    MODEL_GARBAGE,
    st.just(DeadLetterQuery()),
)
"""Every state with filters matching the seeded heads or not, states outside the set,
text limits, page sizes past ``max_page_size``; else not a query at all (a dead-letter
query among them)."""
natural = mix(st.integers(0, 8), st.sampled_from(INTS))
worker_beat = mix(
    built(
        WorkerBeat,
        one_hostile(
            {
                "holder": st.sampled_from(["w", "v"]),
                "host": st.sampled_from(["box", "b2"]),
                "pid": st.sampled_from([1, 2]),
                "consumers": st.sampled_from([(), ("c",), ("c", "audit"), ["d"]]),
                "concurrency": st.integers(1, 8),
                "started_at": st.sampled_from([NOW, NOW - timedelta(hours=3)]),
                "in_flight": st.integers(0, 8),
                "version": st.sampled_from(["0.1.0", "1"]),
                "interval": st.sampled_from([1.0, 5.0, 10]),
                "completed": st.integers(0, 100),
                "failed": st.integers(0, 100),
            },
            {
                "holder": holder,
                "host": name,
                "pid": natural,
                "consumers": mix(
                    listing(consumer_name, LIMITS.max_consumers, "c"),
                    st.sampled_from([tuple(CONSUMERS), [*CONSUMERS, "f"], ("c", "d", "c")]),
                ),
                "concurrency": natural,
                "started_at": moment,
                "in_flight": natural,
                "version": name,
                "interval": seconds,
                "completed": natural,
                "failed": natural,
            },
        ),
    ),
    MODEL_GARBAGE,
    st.just(DeadLetterQuery()),
)
"""Beats of the seeded worker ``w`` (host ``box``, pid 1: the same process, or another)
and of ``v``, one field at a time hostile: counts at and past their bounds (pid and
concurrency at most 2**31 - 1, completed 2**63 - 1), consumers past the limit or named
twice, bad times and intervals; else another object."""
audit_entry = mix(
    built(
        AuditEntry,
        one_hostile(
            {
                "actor": st.sampled_from(["ann", "cli:ops@box"]),
                "action": st.sampled_from(AUDIT_ACTIONS),
                "session_id": st.sampled_from([None, "s", "t"]),
                "consumer": st.sampled_from([None, "c"]),
                "lane": st.sampled_from([None, "x"]),
                "index": st.sampled_from([None, 1, 2]),
                "detail": st.sampled_from([{}, {"matched": 2, "outcome": "redriven"}]),
            },
            {
                "actor": name,
                "action": mix(
                    st.sampled_from(AUDIT_ACTIONS),
                    st.sampled_from(["", "delete", "PAUSE", "redrive", "pause "]),
                ),
                "session_id": st.one_of(st.none(), session_id),
                "consumer": st.one_of(st.none(), consumer_name),
                "lane": lane,
                "index": st.one_of(st.none(), index),
                "detail": mix(
                    st.dictionaries(st.text(max_size=4), json_value, max_size=3),
                    st.sampled_from(
                        [{"x": "x" * LIMITS.max_presence_value_bytes}, {1: 1}, [("f", 1)]]
                    ),
                ),
                "id": st.sampled_from([None, "mine", ""]),
                "at": st.one_of(st.none(), moment),
            },
        ),
    ),
    MODEL_GARBAGE,
    st.just(WorkerBeat("w", "box", 1, (), 1, NOW, 0, "1", 5.0)),
)
"""Entries of every action, one field at a time hostile: names at and past their limits,
actions outside the set, details past ``max_presence_value_bytes`` or not JSON objects,
an ``id`` or ``at`` the store should set; else another object."""


@dataclass(frozen=True)
class Case:
    """One call: the operation's name and its arguments (``OMIT`` keywords left out)."""

    op: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        """Short and safe (hypothesis prints failing cases; some values have no repr)."""
        shown = [show(value) for value in self.args]
        shown += [f"{key}={show(value)}" for key, value in self.kwargs.items() if value is not OMIT]
        return f"{self.op}({', '.join(shown)})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def call(self, store: Store) -> Any:
        kwargs = {key: value for key, value in self.kwargs.items() if value is not OMIT}
        if self.op.startswith("presence."):
            return getattr(store.presence, self.op.removeprefix("presence."))(*self.args, **kwargs)
        return getattr(store, self.op)(*self.args, **kwargs)


def _case(
    op: str, *args: SearchStrategy[Any], **kwargs: SearchStrategy[Any]
) -> SearchStrategy[Case]:
    return st.builds(
        lambda a, k: Case(op, tuple(a), dict(k)), st.tuples(*args), st.fixed_dictionaries(kwargs)
    )


def _one_hostile_case(
    op: str,
    positional: list[str],
    valid: dict[str, SearchStrategy[Any]],
    hostile: dict[str, SearchStrategy[Any]],
) -> SearchStrategy[Case]:
    """A call whose arguments are all valid but at most one (see ``one_hostile``); those
    named in ``positional`` are passed by position, in that order."""

    def call(drawn: dict[str, Any]) -> Case:
        args = tuple(drawn[key] for key in positional)
        return Case(op, args, {k: v for k, v in drawn.items() if k not in positional})

    return one_hostile(valid, hostile).map(call)


SEEDED_COMPLETIONS = [
    Completion("s", "c", None, 1, 1),
    Completion("s", "c", None, 1, 1, [NewEvent("a", id="r1", targets=[Target("d", "x")])]),
    Completion("s", "c", None, 1, 2),
    Completion("s", "d", "x", 2, 1),
    Completion("t", "c", None, 1, 1),
]
"""The seeded live claim (``c`` at 1 in ``s``), its next attempt, an unclaimed lane head
and the dead-lettered attempt."""
complete_and_claim = _one_hostile_case(
    "complete_and_claim",
    ["completions"],
    {
        "completions": st.lists(st.sampled_from(SEEDED_COMPLETIONS), max_size=2),
        "holder": st.sampled_from(["w", "v"]),
        "ttl": st.sampled_from([30, 1.5]),
        "consumers": st.sampled_from([OMIT, None, [Consumer("c")], [Consumer("d")]]),
        "limit": st.sampled_from([OMIT, 1, LIMITS.max_claim_limit]),
        "max_failures": st.sampled_from([OMIT, None, 1, 3]),
    },
    {
        "completions": listing(
            completion, LIMITS.max_completions, Completion("s", "c", None, 1, 1)
        ),
        "holder": holder,
        "ttl": seconds,
        "consumers": consumers,
        "limit": mix(st.integers(1, LIMITS.max_claim_limit + 1), st.sampled_from(INTS)),
        "max_failures": optional(count),
    },
)
"""The seeded completions (repeated, in one batch, is a case too) and a claim, one
argument at a time hostile."""

OPERATIONS: dict[str, SearchStrategy[Case]] = {
    "append": _case("append", session_id, events, consumers=consumers, origin_index=bound),
    "read": _case(
        "read",
        session_id,
        after=bound,
        through=bound,
        types=st.one_of(st.none(), listing(event_type, LIMITS.max_log_types, "a")),
        limit=bound,
    ),
    "wake_log": _case("wake_log", session_id, consumer),
    "cursors": _case("cursors", session_id),
    "claim_available": _case(
        "claim_available",
        session_id,
        holder=holder,
        ttl=seconds,
        exclude=listing(claim_ref, LIMITS.max_claims, ClaimRef("c", None, 1)),
        consumers=consumers,
        max_failures=optional(count),
        through=bound,
    ),
    "claim_any": _case(
        "claim_any",
        holder=holder,
        ttl=seconds,
        consumers=consumers,
        limit=mix(st.integers(1, LIMITS.max_claim_limit + 1), st.sampled_from(INTS)),
        max_failures=optional(count),
    ),
    "renew_claims": _case(
        "renew_claims",
        session_id,
        holder=holder,
        claims=listing(attempt_ref, LIMITS.max_claims, AttemptRef("c", None, 1, 1)),
        ttl=seconds,
    ),
    "release_claims": _case(
        "release_claims",
        session_id,
        holder=holder,
        claims=listing(attempt_ref, LIMITS.max_claims, AttemptRef("c", None, 1, 1)),
    ),
    "complete_attempt": _case(
        "complete_attempt",
        session_id,
        consumer=consumer_name,
        lane=lane,
        index=index,
        attempt=attempt,
        events=returned,
        consumers=consumers,
    ),
    "complete_attempts": _case(
        "complete_attempts",
        listing(completion, LIMITS.max_completions, Completion("s", "c", None, 1, 1)),
    ),
    "fail_attempt": _case(
        "fail_attempt",
        session_id,
        consumer=consumer_name,
        lane=lane,
        index=index,
        attempt=attempt,
        error=error_text,
        max_failures=count,
        retry_after=optional(seconds),
    ),
    "dead_letters": _case("dead_letters", session_id),
    "redrive": _case(
        "redrive",
        session_id,
        consumer=consumer_name,
        index=index,
        action=mix(st.sampled_from(["retry", "skip"]), st.sampled_from(["RETRY", "", "skip "])),
        consumers=consumers,
    ),
    "cancel_head": _case(
        "cancel_head",
        session_id,
        consumer=consumer_name,
        index=index,
        action=mix(
            st.sampled_from(["skip", "dead_letter"]), st.sampled_from(["SKIP", "", "retry"])
        ),
        consumers=consumers,
    ),
    "next_due_in": _case("next_due_in", consumers=consumers),
    "attempts": _case("attempts", session_id, consumer=consumer_name, index=index),
    "activity": _case(
        "activity", since=moment, bucket=st.one_of(st.just(OMIT), seconds, st.sampled_from([60, 0]))
    ),
    "prune_attempts": _case(
        "prune_attempts",
        before=moment,
        limit=st.one_of(st.just(OMIT), mix(st.integers(1, 101), st.sampled_from(INTS))),
    ),
    "backfill": _case(
        "backfill",
        consumer_name,
        limit=st.one_of(st.just(OMIT), mix(st.integers(1, 101), st.sampled_from(INTS))),
    ),
    "read_state": _case("read_state", session_id, name, through=bound),
    "put_snapshots": _case(
        "put_snapshots",
        session_id,
        name,
        listing(snapshot_write, LIMITS.max_snapshot_writes, SnapshotWrite(1, 1)),
    ),
    "clear": _case(
        "clear",
        session_id,
        if_last_index=bound,
        cause=st.one_of(st.just(OMIT), st.none(), attempt_ref),
    ),
    "reclaim": _case("reclaim", session_id),
    "stream": _case("stream", session_id, after=bound),
    "register_consumers": _case(
        "register_consumers", listing(consumer, LIMITS.max_consumers, Consumer("l", LogSpec()))
    ),
    "unregister_consumers": _case(
        "unregister_consumers", listing(consumer_name, LIMITS.max_consumers, "c")
    ),
    "pause_consumers": _case("pause_consumers", listing(consumer_name, LIMITS.max_consumers, "c")),
    "resume_consumers": _case(
        "resume_consumers", listing(consumer_name, LIMITS.max_consumers, "c")
    ),
    "registered_consumers": _case("registered_consumers"),
    "sessions": _case(
        "sessions",
        after=st.one_of(st.just(OMIT), st.none(), session_id),
        limit=st.one_of(st.just(OMIT), mix(st.integers(1, 101), st.sampled_from(INTS))),
    ),
    "complete_and_claim": complete_and_claim,
    "find_dead_letters": _case("find_dead_letters", dead_letter_query),
    "find_heads": _case("find_heads", head_query),
    "consumer_stats": _case("consumer_stats"),
    "heartbeat": _case("heartbeat", worker_beat),
    "forget_workers": _case(
        "forget_workers",
        mix(
            listing(holder, LIMITS.max_page_size, "w"),
            st.sampled_from([[f"w{n}" for n in range(LIMITS.max_page_size)], ["w", "w"]]),
        ),
    ),
    "workers": _case("workers"),
    "record_audit": _case("record_audit", audit_entry),
    "audit_log": _case(
        "audit_log",
        after=st.one_of(st.just(OMIT), st.none(), event_id, st.sampled_from(["g1-1", "seed-1"])),
        limit=st.one_of(st.just(OMIT), mix(st.integers(1, 101), st.sampled_from(INTS))),
    ),
    "presence.write": _case(
        "presence.write",
        name,
        name,
        presence_values,
        at=moment,
        seen=json_value,
        ttl=seconds,
    ),
    "presence.read": _case("presence.read", name),
}

READ_ONLY = frozenset(
    {
        "read",
        "next_due_in",
        "attempts",
        "activity",
        "cursors",
        "dead_letters",
        "read_state",
        "stream",
        "registered_consumers",
        "sessions",
        "find_dead_letters",
        "find_heads",
        "consumer_stats",
        "workers",
        "audit_log",
    }
)
"""Operations that write nothing even when they succeed (``presence.read`` sweeps)."""

case = st.sampled_from(sorted(OPERATIONS)).flatmap(OPERATIONS.__getitem__)
