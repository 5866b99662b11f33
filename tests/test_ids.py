"""``ids.uuid7``: RFC 9562 UUIDv7 text, in order within a process, from any thread."""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from a2pg import ids
from a2pg.ids import uuid7

FIXED_NS = 1_767_225_600_123_456_789
"""2026-01-01T00:00:00.123456789Z: a clock that never moves."""
FIXED_MS = FIXED_NS // 1_000_000


def _ms(text: str) -> int:
    """The id's ``unix_ts_ms``."""
    return uuid.UUID(text).int >> 80


def _rising(texts: list[str]) -> bool:
    return all(a < b for a, b in itertools.pairwise(texts))


def _seq(text: str) -> int:
    """The id's ``rand_a``: the sequence within its millisecond."""
    return (uuid.UUID(text).int >> 64) & 0xFFF


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The generator as a new process has it; its state comes back after the test."""
    for name, value in [("_last_ms", 0), ("_seq", 0), ("_prefix", "")]:
        monkeypatch.setattr(ids, name, value)
    yield


def test_an_id_is_uuidv7_text_of_the_clock_millisecond(fresh_state: None) -> None:
    before = time.time_ns() // 1_000_000
    text = uuid7()
    after = time.time_ns() // 1_000_000
    parsed = uuid.UUID(text)
    assert str(parsed) == text  # canonical: lowercase, 8-4-4-4-12
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122  # the variant bits are 10
    assert (parsed.int >> 62) & 0b11 == 0b10
    assert before <= _ms(text) <= after + 1  # +1: a millisecond's sequence may run out


def test_a_hundred_thousand_ids_are_in_order_and_distinct() -> None:
    made = [uuid7() for _ in range(100_000)]
    assert _rising(made)
    assert len(set(made)) == len(made)
    for text in made[::997]:
        parsed = uuid.UUID(text)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122


def test_ids_from_eight_threads_are_distinct_and_in_order_in_each_thread() -> None:
    """Switching threads every microsecond, so calls interleave mid-way: no two ids share
    their millisecond and sequence (the lock hands each one out), none repeats, and
    each thread sees its ids rise."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    threads_count, per_thread = 8, 20_000
    start = threading.Barrier(threads_count)
    made: list[list[str]] = [[] for _ in range(threads_count)]

    def run(out: list[str]) -> None:
        start.wait()
        for _ in range(per_thread):
            out.append(uuid7())

    workers = [threading.Thread(target=run, args=(out,)) for out in made]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(previous)
    every = [text for out in made for text in out]
    assert len(every) == threads_count * per_thread
    assert len(set(every)) == len(every)
    assert len({(_ms(text), _seq(text)) for text in every}) == len(every)
    for out in made:
        assert _rising(out)
    for text in every[::1009]:
        assert uuid.UUID(text).version == 7


def test_a_millisecond_of_4096_ids_rolls_over_to_the_next(
    monkeypatch: pytest.MonkeyPatch, fresh_state: None
) -> None:
    """With the clock stopped, the sequence counts up from its random start to 4095, then
    the ids move on to the next millisecond from sequence 0, still in order."""
    monkeypatch.setattr(time, "time_ns", lambda: FIXED_NS)
    made = [uuid7() for _ in range(10_000)]
    assert _rising(made)
    assert len(set(made)) == len(made)
    first = _seq(made[0])
    assert _ms(made[0]) == FIXED_MS and first < 2048  # a new millisecond starts below 2048
    at_fixed = 0x1000 - first
    assert [_ms(text) for text in made[:at_fixed]] == [FIXED_MS] * at_fixed
    assert [_seq(text) for text in made[:at_fixed]] == list(range(first, 0x1000))
    rolled = made[at_fixed : at_fixed + 0x1000]
    assert {_ms(text) for text in rolled} == {FIXED_MS + 1}
    assert [_seq(text) for text in rolled] == list(range(0x1000))
    assert _ms(made[at_fixed + 0x1000]) == FIXED_MS + 2
    for text in made[at_fixed - 1 : at_fixed + 1]:
        parsed = uuid.UUID(text)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122


def test_a_clock_that_steps_back_keeps_the_ids_in_order(
    monkeypatch: pytest.MonkeyPatch, fresh_state: None
) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: FIXED_NS)
    ahead = uuid7()
    monkeypatch.setattr(time, "time_ns", lambda: FIXED_NS - 5_000_000_000)
    behind = uuid7()
    assert ahead < behind
    assert _ms(behind) == FIXED_MS


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_repeat_the_parents_next_ids() -> None:
    """The random digits read ahead are dropped in a child: else parent and child, from
    the same state, would hand out the same ids."""
    uuid7()  # random digits are read ahead now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only what is safe after a fork, then out
        try:
            os.write(write, " ".join(uuid7() for _ in range(5)).encode())
        finally:
            os._exit(0)
    os.close(write)
    parent = [uuid7() for _ in range(5)]
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    os.waitpid(pid, 0)
    assert len(child) == 5
    assert not set(child) & set(parent)
    assert {text[19:] for text in child}.isdisjoint(text[19:] for text in parent)
