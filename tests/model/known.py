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


KNOWN_DIFFERENCES: dict[str, Known] = {
    "redrive_of_two_dead_heads": Known(
        ("test_redrive_takes_the_dead_head_listed_first",),
        "redrive is not called when the consumer has a dead event head and a dead lane "
        "head at the same index (memory redrives the lane head, PostgreSQL the event head)",
    ),
    "reused_id_frees_the_old_row": Known(
        (
            "test_reclaim_counts_rows_whose_id_was_reused",
            "test_a_stream_behind_a_clear_still_gets_a_row_whose_id_was_reused",
        ),
        "reclaim's deleted count is not compared while rows below the clear hold an id "
        "appended again above it (PostgreSQL deleted those rows at that append)",
    ),
    "registered_types_reach_cursors_lazily": Known(
        ("test_registered_types_reach_a_cursor_at_its_next_write",),
        "after register_consumers, each session gets claim_available(through=0) naming no "
        "consumers, on both stores: PostgreSQL's cursors then hold the registered types, "
        "which memory's took at once",
    ),
    "repeated_head_in_renew_or_release": Known(
        ("test_renew_and_release_answer_a_head_once",),
        "when one call names a head at two attempt numbers, renewed/released are compared "
        "without repeats (PostgreSQL lists the head once per attempt named)",
    ),
    "batch_differs_from_one_by_one": Known(
        (
            "test_a_later_completion_declaring_other_types_does_not_move_an_earlier_one",
            "test_a_later_completion_appending_an_event_does_not_move_an_earlier_one",
        ),
        "a complete_attempts batch is sent as consecutive batches, cut before a completion "
        "that declares a log consumer with another spec than an earlier one of its session, "
        "or returns events after an earlier one of its session moved a log cursor",
    ),
    "dropped_lane_cursor_remains": Known(
        ("test_wake_log_after_a_clear_ignores_the_dropped_lane_cursor",),
        "wake_log is not called for a log consumer on a lane whose targeted lane cursor a "
        "clear dropped (PostgreSQL still refuses it as a lane cursor)",
    ),
}

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
