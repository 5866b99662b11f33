"""The contract layer, without I/O: limits, argument checks and the rules every backend applies.

``args`` has one ``check_<op>`` per Store operation; ``rules`` the judgements
(replays, fences, claims, failures, completions, clears) the backends share;
``scalars`` and ``values`` the checks of single arguments they are built from (``budget``
sums what one call carries; ``render`` quotes values in messages safely); ``limits``
every bound, configurable (``Limits``) or fixed by the storage (the constants).
"""

from __future__ import annotations

from .limits import (
    DEFAULT_LIMITS,
    EARLIEST_TIME,
    LATEST_TIME,
    MAX_ATTEMPT,
    MAX_INDEX,
    Limits,
)

__all__ = ["DEFAULT_LIMITS", "EARLIEST_TIME", "LATEST_TIME", "MAX_ATTEMPT", "MAX_INDEX", "Limits"]
