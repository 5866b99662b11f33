"""The argument checks' fast paths answer as the long way does.

``encode_json`` takes a plain value that fits in one walk and one encoding, and leaves
every other value to ``_walk_json``, the walk that says why a value is refused: both must
give the same text and size, or the same error. The conformance suites check the errors
of every operation on every backend; these check the fast paths themselves.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import functools
import math
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2pg import A2Error, AttemptRef, Completion, Consumer, LogSpec, NewEvent, Target
from a2pg.contract import DEFAULT_LIMITS, Limits, args
from a2pg.contract import values as checks
from a2pg.contract.args import check_append
from a2pg.contract.budget import CallBudget
from a2pg.contract.limits import MAX_ATTEMPT, MAX_INDEX

from .conformance import hostile_inputs as hostile
from .conformance.hostile_inputs import JSONS, LIMITS, WIDE, small_json


class Number(enum.IntEnum):
    ONE = 1


class Text(str):
    pass


def _deep(depth: int, leaf: Any = 0) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


EDGES: list[Any] = [
    "\\u0000",  # the text of an escaped NUL, which is no NUL
    ["\\\\u0000"],
    {"k\\u0000": 1},
    "\x00",
    {"\x00": 1},
    '\x01\x1f"\\',
    Text("x"),
    {Text("k"): 1},
    Number.ONE,
    [Number.ONE],
    collections.OrderedDict(a=1),
    {True: 1},
    {None: 1},
    {1.5: 2},
    (1, (2, [3])),
    2**64 - 1,
    2**64,
    -(2**64),
    [2**70],
    10**4400,
    [10**4400],
    math.nan,
    [math.inf],
    _deep(LIMITS.max_json_depth),
    _deep(LIMITS.max_json_depth, []),
    _deep(LIMITS.max_json_depth - 1, [1]),
    _deep(LIMITS.max_json_depth + 1),
    {"a": _deep(LIMITS.max_json_depth - 1)},
    {"a": _deep(LIMITS.max_json_depth)},
    "x" * (LIMITS.max_payload_bytes - 2),
    "x" * (LIMITS.max_payload_bytes - 1),
    ["x" * (LIMITS.max_payload_bytes - 4)],
    ["x" * (LIMITS.max_payload_bytes - 3)],
    {"k": "x" * (LIMITS.max_payload_bytes - 8)},
    {"k": "x" * (LIMITS.max_payload_bytes - 7)},
    "é" * (LIMITS.max_payload_bytes // 2 - 1),
    "é" * (LIMITS.max_payload_bytes // 2),
    WIDE * (LIMITS.max_payload_bytes // 4 - 1),
    [None] * (LIMITS.max_payload_bytes // 5),
    [True] * (LIMITS.max_payload_bytes // 5),
    list(range(LIMITS.max_payload_bytes // 4)),
    {str(n): n for n in range(LIMITS.max_payload_bytes // 8)},
    "a\ud800",
    {"\udfff": 1},
    [set()],
    {"x": [1, {"y": b"z"}]},
    [],
    {},
    (),
    "",
    0,
    -0.0,
    None,
]

json_values = st.one_of(
    small_json,
    st.sampled_from(JSONS),
    st.sampled_from(EDGES),
    st.lists(st.sampled_from(EDGES), max_size=3),
    st.dictionaries(st.text(max_size=3), st.sampled_from(EDGES), max_size=3),
)


def _outcome(encode: Any, value: Any, limits: Limits, setting: str) -> tuple[Any, ...]:
    try:
        return (
            "ok",
            encode(value, "v", limits, max_bytes=getattr(limits, setting), setting=setting),
        )
    except A2Error as error:
        return ("refused", error.code, error.message)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    json_values,
    st.sampled_from([LIMITS, DEFAULT_LIMITS, Limits(max_json_depth=1, max_payload_bytes=24)]),
    st.sampled_from(["max_payload_bytes", "max_presence_value_bytes"]),
)
def test_encode_json_answers_as_the_long_walk(value: Any, limits: Limits, setting: str) -> None:
    assert _outcome(checks.encode_json, value, limits, setting) == _outcome(
        checks._walk_json, value, limits, setting
    )


@pytest.mark.parametrize("value", EDGES, ids=[f"edge-{n}" for n in range(len(EDGES))])
def test_each_edge_value_is_encoded_or_refused_as_the_long_walk_does(value: Any) -> None:
    for setting in ("max_payload_bytes", "max_presence_value_bytes"):
        assert _outcome(checks.encode_json, value, LIMITS, setting) == _outcome(
            checks._walk_json, value, LIMITS, setting
        )


def test_a_plain_payload_takes_the_fast_path() -> None:
    payload = {"text": "héllo", "n": 1, "x": [1.5, None, True, {"y": ()}]}
    text = '{"text":"héllo","n":1,"x":[1.5,null,true,{"y":[]}]}'
    assert checks._plain_json(payload, 256, 1_000) == (text, len(text.encode()))
    assert checks._plain_json(payload, 2, 1_000) is None  # {"y": ()} is 3 deep: the long way


def test_events_and_checked_events_are_built_without_their_init() -> None:
    """A field added to ``NewEvent`` or ``CheckedEvent`` turns the fast constructors off
    (they would leave it unset): then update their names in ``contract/values.py``."""
    assert checks._EVENT_SETTERS and checks._CHECKED_SETTERS
    built = checks._new_event("t", {"a": 1}, "i", None, (Target("c"),))
    assert built == NewEvent("t", {"a": 1}, "i", None, (Target("c"),))
    assert hash(built.targets) == hash((Target("c"),))
    checked = checks._new_checked(built, "{}")
    assert checked == checks.CheckedEvent(built, "{}")


def test_an_exact_event_that_needs_no_normalising_is_kept_as_it_is() -> None:
    cause = AttemptRef("c", "lane", 1, 2)
    event = NewEvent("t", {"a": 1}, "e1", cause, (Target("c"), Target("d", "x")))
    [checked] = check_append(
        "s", [event], consumers=None, origin_index=None, limits=DEFAULT_LIMITS
    ).events
    assert checked.event is event
    listed = NewEvent("t", None, targets=[Target("c")])
    [rebuilt] = checks.check_events([listed], DEFAULT_LIMITS, CallBudget(DEFAULT_LIMITS))
    assert rebuilt.event == NewEvent("t", None, targets=(Target("c"),))
    assert type(rebuilt.event.targets) is tuple


class Name(str):
    pass


def test_subclassed_names_and_events_are_normalised_as_before() -> None:
    class Event(NewEvent):
        pass

    class Ref(Target):
        pass

    event = Event("t", [1], targets=(Ref(Name("c")),))
    [checked] = checks.check_events([event], DEFAULT_LIMITS)
    assert type(checked.event) is NewEvent
    [target] = checked.event.targets
    assert type(target) is Target and target == Target("c")
    assert checked.payload_json == "[1]"


# -- the completion and claim checks ----------------------------------------------------


def _checked(call: Any) -> tuple[Any, ...]:
    """What a check answers, with the types of what it returns (a ``str`` subclass equals
    its text, a list of no events is not a tuple of none)."""
    try:
        result = call()
    except A2Error as error:
        return ("refused", error.code, error.message)
    return ("ok", _shape(result))


def _shape(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return (type(value), tuple(_shape(item) for item in value))
    if isinstance(value, args.CompletionArgs | args.ClaimAnyArgs | args.CompleteAndClaimArgs):
        return (type(value), *(_shape(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, Completion | Consumer):
        return (type(value), *(_shape(getattr(value, f.name)) for f in dataclasses.fields(value)))
    return (type(value), value)


@contextlib.contextmanager
def _long_way() -> Iterator[None]:
    """The checks with their fast paths off: every argument checked field by field."""
    with (
        mock.patch.object(args, "_plain_completion", lambda *a: None),
        mock.patch.object(args, "_plain_claim_any", lambda *a: None),
    ):
        yield


def _both_ways(check: Any, *given: Any, **options: Any) -> tuple[tuple[Any, ...], ...]:
    """``check(*given, **options)`` answered with its fast paths, then the long way."""
    fast = _checked(functools.partial(check, *given, **options))
    with _long_way():
        return fast, _checked(functools.partial(check, *given, **options))


class Index(enum.IntEnum):
    ONE = 1


COMPLETION_EDGES: list[Any] = [
    Completion("s", "c", None, 1, 1),
    Completion("s", "c", "lane", 1, 1, []),
    Completion("s", "c", None, 1, 1, [], []),
    Completion("s", "c", None, 1, 1, (), [Consumer("c")]),
    Completion("s", "c", None, 1, 1, [NewEvent("t", id="r1")]),
    Completion("s", "c", None, 1, 1, (NewEvent("t", id="r1"), NewEvent("t", id="r1"))),
    Completion("s", "c", None, 1, 1, [NewEvent("t")]),
    Completion("s", "c", None, 1, 1, iter(())),  # type: ignore[arg-type]
    Completion("s", "c", None, 1, 1, None),  # type: ignore[arg-type]
    Completion("s", "c", None, 1, 1, "ab"),  # type: ignore[arg-type]
    Completion(Name("s"), "c", None, 1, 1),
    Completion("s", Name("c"), Name("l"), 1, 1),
    Completion("s", "c", None, Index.ONE, 1),
    Completion("s", "c", None, 1, True),
    Completion("s", "c", None, 1.0, 1),  # type: ignore[arg-type]
    Completion("s", "c", None, 0, 1),
    Completion("s", "c", None, MAX_INDEX, MAX_ATTEMPT),
    Completion("s", "c", None, MAX_INDEX + 1, 1),
    Completion("s", "c", None, 1, MAX_ATTEMPT + 1),
    Completion("", "c", None, 1, 1),
    Completion("s", "", None, 1, 1),
    Completion("s", "c", "", 1, 1),
    Completion("s\x00", "c", None, 1, 1),
    Completion("s", "c\ud800", None, 1, 1),
    Completion("s", "c", "l\x00", 1, 1),
    Completion("s" * DEFAULT_LIMITS.max_session_id_length, "c", None, 1, 1),
    Completion("s" * (DEFAULT_LIMITS.max_session_id_length + 1), "c", None, 1, 1),
    Completion("s", "é" * (DEFAULT_LIMITS.max_name_bytes // 2), None, 1, 1),
    Completion("s", "é" * (DEFAULT_LIMITS.max_name_bytes // 2 + 1), None, 1, 1),
    Completion("s", "c", WIDE * (DEFAULT_LIMITS.max_name_bytes // 4 + 1), 1, 1),
    Completion(1, "c", None, 1, 1),  # type: ignore[arg-type]
    Completion("s", None, None, 1, 1),  # type: ignore[arg-type]
    Completion("s", "c", 1, 1, 1),  # type: ignore[arg-type]
    None,
    ("s", "c", None, 1, 1),
]


class Later(Completion):
    pass


COMPLETION_EDGES.append(Later("s", "c", None, 1, 1))


@pytest.mark.parametrize("limits", [DEFAULT_LIMITS, LIMITS], ids=["default", "small"])
@pytest.mark.parametrize(
    "completion", COMPLETION_EDGES, ids=[f"edge-{n}" for n in range(len(COMPLETION_EDGES))]
)
def test_each_edge_completion_is_checked_as_the_long_way_does(
    completion: Any, limits: Limits
) -> None:
    for listed in ([completion], [Completion("t", "c", None, 2, 1), completion]):
        fast, long = _both_ways(args.check_complete_attempts, listed, limits=limits)
        assert fast == long


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.one_of(hostile.completion, st.sampled_from(COMPLETION_EDGES)), max_size=5),
    st.sampled_from([LIMITS, DEFAULT_LIMITS]),
)
def test_complete_attempts_answers_as_the_long_way(completions: Any, limits: Limits) -> None:
    fast, long = _both_ways(args.check_complete_attempts, completions, limits=limits)
    assert fast == long


def _claim(options: dict[str, Any]) -> dict[str, Any]:
    return {key: None if value is hostile.OMIT else value for key, value in options.items()}


CLAIM_EDGES: list[dict[str, Any]] = [
    {"holder": "w", "ttl": 30.0, "consumers": None, "limit": 10, "max_failures": None},
    {"holder": "w", "ttl": 30.0, "consumers": [Consumer("c")], "limit": 10, "max_failures": 5},
    {
        "holder": "w",
        "ttl": 30.0,
        "consumers": (Consumer("c"), Consumer("d")),
        "limit": 1,
        "max_failures": MAX_ATTEMPT,
    },
    {
        "holder": "w",
        "ttl": 30.0,
        "consumers": [Consumer("c"), Consumer("c")],
        "limit": 10,
        "max_failures": 5,
    },
    {
        "holder": "w",
        "ttl": 30.0,
        "consumers": [Consumer("c", LogSpec())],
        "limit": 10,
        "max_failures": 5,
    },
    {
        "holder": "w",
        "ttl": 30.0,
        "consumers": [Consumer(Name("c"))],
        "limit": 10,
        "max_failures": 5,
    },
    {"holder": "w", "ttl": 30.0, "consumers": [Consumer("")], "limit": 10, "max_failures": 5},
    {"holder": "w", "ttl": 30.0, "consumers": [], "limit": 10, "max_failures": 5},
    {"holder": "w", "ttl": 30.0, "consumers": "c", "limit": 10, "max_failures": 5},
    {
        "holder": "w",
        "ttl": 30.0,
        "consumers": [Consumer("c")] * 2000,
        "limit": 10,
        "max_failures": 5,
    },
    {"holder": "w", "ttl": 30, "consumers": None, "limit": 10, "max_failures": None},
    {"holder": "w", "ttl": math.nan, "consumers": None, "limit": 10, "max_failures": None},
    {"holder": "w", "ttl": 0.0, "consumers": None, "limit": 10, "max_failures": None},
    {"holder": "w", "ttl": 1e300, "consumers": None, "limit": 10, "max_failures": None},
    {"holder": "w", "ttl": 30.0, "consumers": None, "limit": True, "max_failures": None},
    {"holder": "w", "ttl": 30.0, "consumers": None, "limit": 0, "max_failures": None},
    {"holder": "w", "ttl": 30.0, "consumers": None, "limit": 10**6, "max_failures": None},
    {"holder": "w", "ttl": 30.0, "consumers": None, "limit": 10, "max_failures": 0},
    {"holder": "w", "ttl": 30.0, "consumers": None, "limit": 10, "max_failures": Index.ONE},
    {"holder": "", "ttl": 30.0, "consumers": None, "limit": 10, "max_failures": None},
    {"holder": Name("w"), "ttl": 30.0, "consumers": None, "limit": 10, "max_failures": None},
    {"holder": "w\x00", "ttl": 30.0, "consumers": None, "limit": 10, "max_failures": None},
    {"holder": None, "ttl": 30.0, "consumers": None, "limit": 10, "max_failures": None},
]


@pytest.mark.parametrize("limits", [DEFAULT_LIMITS, LIMITS], ids=["default", "small"])
@pytest.mark.parametrize("options", CLAIM_EDGES, ids=[f"edge-{n}" for n in range(len(CLAIM_EDGES))])
def test_each_edge_claim_is_checked_as_the_long_way_does(
    options: dict[str, Any], limits: Limits
) -> None:
    fast, long = _both_ways(args.check_claim_any, **options, limits=limits)
    assert fast == long
    completions = [Completion("s", "c", None, 1, 1)]
    fast, long = _both_ways(args.check_complete_and_claim, completions, **options, limits=limits)
    assert fast == long


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(hostile.completion, max_size=3),
    st.fixed_dictionaries(
        {
            "holder": hostile.holder,
            "ttl": hostile.seconds,
            "consumers": hostile.consumers,
            "limit": hostile.count,
            "max_failures": st.one_of(st.none(), hostile.count),
        }
    ),
    st.sampled_from([LIMITS, DEFAULT_LIMITS]),
)
def test_complete_and_claim_answers_as_the_long_way(
    completions: Any, options: dict[str, Any], limits: Limits
) -> None:
    claim = _claim(options)
    fast, long = _both_ways(args.check_complete_and_claim, completions, **claim, limits=limits)
    assert fast == long


def test_a_workers_own_completions_and_claim_take_the_fast_paths() -> None:
    """The worker's completions (no events: an empty tuple) and claim pass as they are."""
    completion = Completion("s", "c", "lane", 3, 2)
    consumers = [Consumer("c"), Consumer("d")]
    checked = args.check_complete_and_claim(
        [completion],
        holder="host:1:abc",
        ttl=30.0,
        consumers=consumers,
        limit=10,
        max_failures=5,
        limits=DEFAULT_LIMITS,
    )
    [one] = checked.completions
    assert one.completion is completion and one.events == []
    assert checked.claim == args.ClaimAnyArgs("host:1:abc", 30.0, consumers, 10, 5)
    assert checked.claim.consumers is not consumers  # a list of its own, of the same values
    assert args._completion_args is not args.CompletionArgs  # built without its __init__
    assert args._completion_args(completion, []) == args.CompletionArgs(completion, [])
