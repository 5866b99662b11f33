"""How a worker shares each claim cycle's free slots among its consumers, by weight.

Without ``priority`` or ``concurrency`` on any served consumer a worker claims the oldest
ready heads of all of them in one call, which lets one consumer with a deep backlog (a
log consumer backfilling) take every slot while another's heads wait. A worker serving a
consumer that sets either claims through ``Shares`` instead:

- **Groups.** Each consumer that sets ``priority`` or ``concurrency`` is a group of its
  own, weighing its ``priority`` (1 when it sets only ``concurrency``). The consumers
  that set neither form one group, claimed together oldest first as before, weighing as
  many as they are (1 each).
- **Dealing.** The cycle's free slots (``min(claim_batch, free)``) are dealt one at a
  time. Each group has a *pass*, a virtual time; a slot goes to the group with the
  lowest pass (ties: the group declared first) among those with room (a consumer with
  ``concurrency`` N has room for N minus its handlers running) that were not found
  empty this cycle, and moves that group's pass on by ``1 / weight``. So among groups
  with ready work, slots go in proportion to their weights: 4 to 1 gives one group
  four of every five slots.
- **Claims.** Then one ``claim_any`` (or ``complete_and_claim``, with the completions
  waiting) per group dealt slots, in declaration order, with those slots as its limit.
  A group that comes back short is empty: its unused slots are taken back (its pass
  moved back), it is out for the rest of the cycle, and the slots are dealt again among
  the others, who claim again in the same cycle. Capacity stays busy while any served
  consumer with room has ready work.
- **No credit banked.** At the end of a cycle a group that was out, or had no room,
  has its pass raised to the lowest pass among the groups still contending (all passes
  start again level when none is): idle or throttled time earns no burst later. Passes
  persist across cycles otherwise, so a group that got no slot in a small cycle is
  first in the next.

Starvation-free: a group with ready work and room gets a slot within every
``1 + sum(floor(w_j / w) + 1)`` consecutive slots dealt (``w`` its weight, ``w_j`` the
others'), however the others weigh: with weights 4 and 1, the lighter group gets one
of any 6. It is a share, not a strict priority.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ..models import Consumer
from .app import Registration

Claim = Callable[[tuple[Consumer, ...], int], Awaitable[int]]
"""Claims up to ``limit`` heads of the consumers and starts them; says how many came."""


@dataclass(eq=False, slots=True)
class Group:
    """Consumers claimed together in one call, with their weight and room."""

    consumers: tuple[Consumer, ...]
    weight: int
    limit: int | None
    """Handlers of its (one) consumer that may run at once; None: unbounded."""
    order: int
    stride: int = 1
    """How far one slot moves its pass: ``lcm(weights) / weight``, an exact integer."""
    position: int = 0
    """Its pass (virtual time): the lowest pass gets the next slot."""
    dealt: int = 0
    """Slots dealt to it in the current round and not yet claimed."""
    out: bool = False
    """It came back short this cycle: nothing of it was left to claim."""

    @property
    def names(self) -> str:
        return ",".join(c.name for c in self.consumers)

    def room(self, running: Callable[[str], int]) -> int | None:
        """More handlers it may start now; None when unbounded."""
        if self.limit is None:
            return None
        return max(0, self.limit - running(self.consumers[0].name))


@dataclass(frozen=True, slots=True)
class Cycle:
    """What one sharing cycle claimed."""

    claimed: int
    """Heads claimed in all (dead-lettered ones included, as ``claim_any`` counts)."""
    room_bound: bool
    """A group not found empty had no room left: it may have ready work, which a handler
    of its ending lets the worker claim (not only a wakeup)."""


@dataclass(slots=True)
class ShareStats:
    """Heads each group claimed and the cycles run (what ``Worker.shares`` tells tests)."""

    cycles: int = 0
    claimed: dict[str, int] = field(default_factory=dict)


class Shares:
    """The groups of one worker's served consumers and their passes (see the module)."""

    def __init__(self, registrations: Sequence[Registration]) -> None:
        own = [r for r in registrations if r.shared]
        rest = tuple(r.consumer for r in registrations if not r.shared)
        groups: list[tuple[int, tuple[Consumer, ...], int, int | None]] = []
        for position, r in enumerate(registrations):
            if r.shared:
                groups.append((position, (r.consumer,), r.priority or 1, r.concurrency))
        if rest:
            first = next(i for i, r in enumerate(registrations) if not r.shared)
            groups.append((first, rest, len(rest), None))
        if not own:
            raise ValueError("no consumer sets priority or concurrency: nothing to share")
        groups.sort(key=lambda g: g[0])
        scale = math.lcm(*(weight for _, _, weight, _ in groups))
        self.groups = [
            Group(consumers, weight, limit, order, stride=scale // weight)
            for order, (_, consumers, weight, limit) in enumerate(groups)
        ]
        self.stats = ShareStats(claimed={g.names: 0 for g in self.groups})

    @staticmethod
    def of(registrations: Sequence[Registration]) -> Shares | None:
        """The shares of these consumers; None when none sets ``priority`` or
        ``concurrency`` (the worker then claims them all in one call)."""
        return Shares(registrations) if any(r.shared for r in registrations) else None

    async def cycle(self, free: int, running: Callable[[str], int], claim: Claim) -> Cycle:
        """Deals ``free`` slots and claims them, group by group, until they are claimed or
        no group with room is left that was not found empty."""
        claimed = 0
        try:
            while free > 0:
                plan = self.deal(free, running)
                if not plan:
                    break
                for group in plan:
                    got = await claim(group.consumers, group.dealt)
                    self.took(group, got)
                    claimed += got
                    free -= got
        finally:
            for group in self.groups:  # a claim that failed: its slots were not used
                if group.dealt:
                    group.position -= group.dealt * group.stride
                    group.dealt = 0
            room_bound = self.end(running)
        return Cycle(claimed, room_bound)

    def deal(self, free: int, running: Callable[[str], int]) -> list[Group]:
        """Deals ``free`` slots (sets each group's ``dealt``); the groups dealt any, in order."""
        queue: list[tuple[int, int, int | None]] = []
        for group in self.groups:
            room = group.room(running)
            if not group.out and room != 0:
                queue.append((group.position, group.order, room))
        heapq.heapify(queue)
        groups = self.groups
        while free > 0 and queue:
            _, order, room = heapq.heappop(queue)
            group = groups[order]
            group.position += group.stride
            group.dealt += 1
            free -= 1
            if room is None or room > 1:
                heapq.heappush(queue, (group.position, order, None if room is None else room - 1))
        return [g for g in groups if g.dealt]

    def took(self, group: Group, got: int) -> None:
        """``group``'s claim came back with ``got`` heads: slots it left are taken back."""
        unused = group.dealt - got
        if unused > 0:
            group.position -= unused * group.stride
            group.out = True
        group.dealt = 0
        self.stats.claimed[group.names] += got

    def end(self, running: Callable[[str], int]) -> bool:
        """Ends the cycle: no credit banked by groups out or without room (see the module),
        passes rebased to 0; says whether a group not out had no room left."""
        contending = [g for g in self.groups if not g.out and g.room(running) != 0]
        room_bound = any(not g.out and g.room(running) == 0 for g in self.groups)
        frontier = min((g.position for g in contending), default=None)
        for group in self.groups:
            if frontier is None:  # no one to be fair against: all start again level
                group.position = 0
            elif group.position < frontier:
                group.position = frontier
        low = min(g.position for g in self.groups)
        for group in self.groups:
            group.position -= low
            group.out = False
        self.stats.cycles += 1
        return room_bound
