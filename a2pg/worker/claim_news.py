"""What the workers of one process tell each other of their claims, so that one
notification does not send every one of them to claim.

Every worker sharing a store hears each notification. A claim that began after a worker
heard one, by any worker of the process serving the same consumers, saw the work that
notification announced (it was committed before it was notified); if that claim took
fewer heads than it asked for, nothing it could see was left, so the worker that heard
the notification need not claim too: without this, four workers of one process made
three empty claims for every batch appended.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

from ..models import Consumer
from ..store import Store


class ClaimNews:
    """When the latest claim that came back short (fewer heads than its limit) began."""

    def __init__(self) -> None:
        self.short_claim_began = -math.inf

    def claimed(self, began: float, heads: int, limit: int) -> None:
        if heads < limit and began > self.short_claim_began:
            self.short_claim_began = began

    def taken_since(self, moment: float) -> bool:
        """Whether a claim that began after ``moment`` left nothing it could see."""
        return self.short_claim_began > moment


_shared: weakref.WeakKeyDictionary[Store, dict[tuple[str, ...], ClaimNews]] = (
    weakref.WeakKeyDictionary()
)


def news_for(store: Store, consumers: Sequence[Consumer]) -> ClaimNews:
    """The news of the workers of this process on ``store`` serving ``consumers``; a store
    that cannot be referenced weakly gets news of its own (nothing shared)."""
    key = tuple(sorted(consumer.name for consumer in consumers))
    try:
        by_consumers = _shared.setdefault(store, {})
    except TypeError:
        return ClaimNews()
    return by_consumers.setdefault(key, ClaimNews())
