"""Known differences between the backends that the model-based test tolerates, for now.

Each entry names its minimal reproducers in ``tests/conformance/test_edges.py`` (marked
``xfail(strict=True)`` on the backend that is wrong, so they fail the suite once it is
fixed). When a difference is fixed, delete its entry here: the model then checks that
case again. Each tolerance applies only in the one situation its entry describes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Known:
    reproducers: tuple[str, ...]
    """Test functions of ``tests/conformance/test_edges.py``."""
    tolerance: str
    """What the model does about it, and only in which situation."""


KNOWN_DIFFERENCES: dict[str, Known] = {}

KNOWN_NAMES = frozenset(
    {
        "redrive_of_two_dead_heads",
        "reused_id_frees_the_old_row",
        "registered_types_reach_cursors_lazily",
        "repeated_head_in_renew_or_release",
        "batch_differs_from_one_by_one",
        "dropped_lane_cursor_remains",
    }
)
"""Every difference the model knows how to tolerate, whether or not it still does."""


def tolerated(name: str) -> bool:
    """Whether the model still tolerates this known difference."""
    if name not in KNOWN_NAMES:
        raise KeyError(f"no such known difference: {name}")
    return name in KNOWN_DIFFERENCES
