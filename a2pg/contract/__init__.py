"""The contract layer, without I/O: limits, argument checks and the rules every backend applies.

``args`` has one ``check_<op>`` per Store operation; ``rules`` the judgements
(replays, fences, claims, failures, completions, clears) the backends share;
``values`` the checks of single values both are built from.
"""

from __future__ import annotations

from .limits import DEFAULT_LIMITS, Limits

__all__ = ["DEFAULT_LIMITS", "Limits"]
