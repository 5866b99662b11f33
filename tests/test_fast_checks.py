"""The argument checks' fast paths answer as the long way does.

``encode_json`` takes a plain value that fits in one walk and one encoding, and leaves
every other value to ``_walk_json``, the walk that says why a value is refused: both must
give the same text and size, or the same error. The conformance suites check the errors
of every operation on every backend; these check the fast paths themselves.
"""

from __future__ import annotations

import collections
import enum
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2pg import A2Error, AttemptRef, NewEvent, Target
from a2pg.contract import DEFAULT_LIMITS, Limits
from a2pg.contract import values as checks
from a2pg.contract.args import check_append
from a2pg.contract.budget import CallBudget

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
