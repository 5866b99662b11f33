"""Exponential backoff with jitter: how long a failed attempt waits before its retry."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from .contract.limits import MAX_SECONDS


@dataclass(frozen=True, slots=True)
class Backoff:
    """``base * 2 ** (failures - 1)`` seconds, capped at ``cap``, minus up to ``jitter`` of it.

    Jitter spreads the retries of heads that failed together (one bad deploy, one
    dead dependency) so they do not all come back in the same instant. ``jitter`` is
    the fraction of the delay that is random: 0 gives exact delays, 1 gives "full
    jitter" (uniform between 0 and the delay).
    """

    base: float = 1.0
    cap: float = 300.0
    jitter: float = 0.5
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.base) and self.base > 0):
            raise ValueError(f"Backoff.base must be a positive number of seconds, got {self.base}")
        if not (math.isfinite(self.cap) and self.base <= self.cap <= MAX_SECONDS):
            raise ValueError(
                f"Backoff.cap must be at least base ({self.base}) and at most "
                f"{MAX_SECONDS:.0f} seconds, got {self.cap}"
            )
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"Backoff.jitter must be between 0 and 1, got {self.jitter}")

    def ceiling(self, failures: int) -> float:
        """The delay before jitter after ``failures`` failures (1 for the first failure)."""
        exponent = max(failures, 1) - 1
        if exponent >= 64:  # 2**64 * any sane base is far past any cap
            return self.cap
        return min(self.cap, self.base * 2.0**exponent)

    def delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failure of a head; always > 0."""
        ceiling = self.ceiling(failures)
        delay = ceiling * (1.0 - self.jitter * self.rng.random())
        return max(delay, 1e-3)
