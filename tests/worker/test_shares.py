"""``Shares``, the dealing rule alone (no store): proportions, the starvation bound, room,
leftovers dealt again, no credit banked, and claims that fail."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from a2pg import Consumer, Head
from a2pg.worker import App
from a2pg.worker.app import Registration
from a2pg.worker.shares import Shares


async def _noop(head: Head) -> None:
    return None


def registrations(app: App, *names: str) -> list[Registration]:
    found = [app.registration(name) for name in names]
    return [r for r in found if r is not None]


def shares_of(**weights: int | None) -> Shares:
    app = App()
    for name, weight in weights.items():
        app.add(name, _noop, priority=weight)
    made = Shares.of(registrations(app, *weights))
    assert made is not None
    return made


class Backlog:
    """Ready heads per consumer (None: endless), claimed as a store would, oldest first
    among a group's consumers; records each call."""

    def __init__(self, ready: dict[str, int | None]) -> None:
        self.ready = ready
        self.calls: list[tuple[tuple[str, ...], int, int]] = []
        self.got: Counter[str] = Counter()
        self.running: Counter[str] = Counter()
        self.fail_on: str | None = None

    async def claim(self, consumers: tuple[Consumer, ...], limit: int) -> int:
        names = tuple(c.name for c in consumers)
        if self.fail_on in names:
            raise ConnectionError("the store is away")
        got = 0
        for name in names:
            left = self.ready[name]
            take = limit - got if left is None else min(limit - got, left)
            if left is not None:
                self.ready[name] = left - take
            self.got[name] += take
            self.running[name] += take
            got += take
        self.calls.append((names, limit, got))
        return got

    def running_of(self, name: str) -> int:
        return self.running[name]


async def test_weights_4_and_1_share_each_cycle_of_5_exactly() -> None:
    shares = shares_of(a=4, b=1)
    backlog = Backlog({"a": None, "b": None})
    for cycle in range(20):
        before = Counter(backlog.got)
        await shares.cycle(5, lambda name: 0, backlog.claim)
        assert backlog.got - before == Counter(a=4, b=1), cycle
    assert shares.stats.cycles == 20 and shares.stats.claimed == {"a": 80, "b": 20}


@pytest.mark.parametrize("seed", range(12))
async def test_any_weights_keep_every_share_within_a_slot_per_group(seed: int) -> None:
    rng = random.Random(seed)
    weights = {f"c{i}": rng.randint(1, 12) for i in range(rng.randint(2, 5))}
    shares = shares_of(**weights)
    backlog = Backlog(dict.fromkeys(weights))
    total_weight = sum(weights.values())
    for _ in range(200):
        await shares.cycle(rng.randint(1, 40), lambda name: 0, backlog.claim)
        dealt = sum(backlog.got.values())
        for name, weight in weights.items():
            ideal = dealt * weight / total_weight
            assert abs(backlog.got[name] - ideal) <= len(weights), (name, backlog.got, ideal)


@pytest.mark.parametrize("seed", range(12))
async def test_no_group_waits_past_the_documented_bound(seed: int) -> None:
    """One slot per cycle shows the order slots are dealt in: a group with work waits at
    most ``sum(floor(w_j / w) + 1)`` slots (``a2pg.worker.shares``)."""
    rng = random.Random(1000 + seed)
    weights = {f"c{i}": rng.choice([1, 1, 2, 3, 4, 7, 50]) for i in range(rng.randint(2, 4))}
    shares = shares_of(**weights)
    backlog = Backlog(dict.fromkeys(weights))
    winners: list[str] = []
    for _ in range(600):
        await shares.cycle(1, lambda name: 0, backlog.claim)
        winners.append(backlog.calls[-1][0][0])
    for name, weight in weights.items():
        bound = sum(w // weight + 1 for other, w in weights.items() if other != name)
        gap = longest_gap(winners, name)
        assert gap <= bound, (name, weights, gap, bound)


def longest_gap(winners: list[str], name: str) -> int:
    gap = longest = 0
    for winner in winners:
        gap = 0 if winner == name else gap + 1
        longest = max(longest, gap)
    return longest


async def test_a_group_never_gets_more_than_its_room() -> None:
    app = App()
    app.add("limited", _noop, concurrency=3, priority=10)
    app.add("other", _noop)
    shares = Shares.of(registrations(app, "limited", "other"))
    assert shares is not None
    backlog = Backlog({"limited": None, "other": None})
    backlog.running["limited"] = 1
    result = await shares.cycle(10, backlog.running_of, backlog.claim)
    assert backlog.calls == [(("limited",), 2, 2), (("other",), 8, 8)]
    assert result.claimed == 10 and result.room_bound  # limited has more, but no room
    backlog.calls.clear()
    result = await shares.cycle(10, backlog.running_of, backlog.claim)  # none ended
    assert backlog.calls == [(("other",), 10, 10)] and result.room_bound
    backlog.running["limited"] = 0  # its three ended
    backlog.ready["other"] = 0
    backlog.calls.clear()
    result = await shares.cycle(10, backlog.running_of, backlog.claim)
    assert (backlog.calls[0][0], backlog.calls[0][1]) == (("limited",), 3)
    assert backlog.calls[1:] == [(("other",), 7, 0)]
    assert result.claimed == 3 and result.room_bound


async def test_what_a_group_leaves_is_dealt_again_in_the_same_cycle() -> None:
    shares = shares_of(a=4, b=1, c=1)
    backlog = Backlog({"a": 3, "b": 0, "c": None})
    result = await shares.cycle(12, lambda name: 0, backlog.claim)
    assert result.claimed == 12 and not result.room_bound
    assert backlog.got == Counter(a=3, c=9)
    first_round = backlog.calls[:3]
    assert [names for names, _, _ in first_round] == [("a",), ("b",), ("c",)]
    assert all(names == ("c",) for names, _, _ in backlog.calls[3:])  # the others: out


async def test_a_cycle_short_of_everything_is_drained() -> None:
    shares = shares_of(a=4, b=None)
    backlog = Backlog({"a": 1, "b": 2})
    result = await shares.cycle(10, lambda name: 0, backlog.claim)
    assert (result.claimed, result.room_bound) == (3, False)
    assert [g.position for g in shares.groups] == [0, 0]  # no one contends: level again


async def test_an_idle_group_banks_no_credit() -> None:
    shares = shares_of(a=4, b=1)
    backlog = Backlog({"a": 0, "b": None})
    for _ in range(50):  # b alone, 10 a cycle: a is dealt slots, finds none
        await shares.cycle(10, lambda name: 0, backlog.claim)
    assert backlog.got == Counter(b=500)
    backlog.ready["a"] = None
    before = Counter(backlog.got)
    await shares.cycle(10, lambda name: 0, backlog.claim)
    assert backlog.got - before == Counter(a=8, b=2)


async def test_a_failed_claim_takes_its_slots_back() -> None:
    shares = shares_of(a=4, b=1)
    backlog = Backlog({"a": None, "b": None})
    await shares.cycle(5, lambda name: 0, backlog.claim)
    assert [g.position for g in shares.groups] == [0, 0]  # 4 and 1: level again
    backlog.fail_on = "b"
    with pytest.raises(ConnectionError):
        await shares.cycle(5, lambda name: 0, backlog.claim)
    assert backlog.got == Counter(a=8, b=1)  # a's 4 of the second cycle were claimed
    # a is charged its 4 (one stride each), b nothing for the slot it never got
    assert [g.position for g in shares.groups] == [4, 0]
    assert shares.stats.claimed == {"a": 8, "b": 1}
    backlog.fail_on = None
    before = Counter(backlog.got)
    await shares.cycle(5, lambda name: 0, backlog.claim)
    assert backlog.got - before == Counter(a=3, b=2)  # b is owed the slot it missed


def test_the_unset_share_one_group_weighing_their_count() -> None:
    app = App()
    app.add("x", _noop)
    app.add("heavy", _noop, priority=3)
    app.add("y", _noop)
    app.add("bounded", _noop, concurrency=2)
    shares = Shares.of(registrations(app, "x", "heavy", "y", "bounded"))
    assert shares is not None
    assert [(g.names, g.weight, g.limit) for g in shares.groups] == [
        ("x,y", 2, None),
        ("heavy", 3, None),
        ("bounded", 1, 2),
    ]
    assert Shares.of(registrations(app, "x", "y")) is None  # neither sets anything
