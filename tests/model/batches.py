"""Which ``complete_attempts`` batches PostgreSQL applies differently from one by one.

The tolerance of ``known`` entry ``batch_differs_from_one_by_one``: such a batch is
sent as consecutive batches, cut right before the completion that would see the
difference, so every other batch is still compared whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from a2pg import Completion, Consumer, LogSpec

Spec = tuple[str, tuple[str, ...] | None, bool]


def spec(log: LogSpec) -> Spec:
    return (log.lane, None if log.types is None else tuple(log.types), log.backfill)


def declared_specs(completion: Completion, registered: Sequence[Consumer]) -> dict[str, Spec]:
    """The log consumers a completion wakes (those it names, else the registered ones)."""
    wake = registered if completion.consumers is None else completion.consumers
    return {c.name: spec(c.log) for c in wake if c.log is not None}


def sees_the_difference(
    earlier: Sequence[Completion],
    later: Completion,
    registered: Sequence[Consumer],
    log_lanes: set[tuple[str, str, str | None]],
) -> bool:
    """Whether PostgreSQL would apply ``later`` differently after ``earlier`` in one batch:
    it declares a log consumer with another spec than an earlier completion of its
    session did, or it returns events after an earlier one moved a log cursor of its
    session (``log_lanes`` holds each session's log cursors as ``(session, consumer,
    lane)``)."""
    same = [c for c in earlier if c.session_id == later.session_id]
    mine = declared_specs(later, registered)
    for other in same:
        theirs = declared_specs(other, registered)
        if any(name in theirs and theirs[name] != s for name, s in mine.items()):
            return True
    moved_a_log = any((c.session_id, c.consumer, c.lane) in log_lanes for c in same)
    return moved_a_log and bool(later.events)


def cut(
    batch: Sequence[Completion],
    registered: Sequence[Consumer],
    log_lanes: set[tuple[str, str, str | None]],
) -> list[list[Completion]]:
    """The batch as consecutive batches none of which PostgreSQL applies differently."""
    parts: list[list[Completion]] = [[]]
    for completion in batch:
        if sees_the_difference(parts[-1], completion, registered, log_lanes):
            parts.append([])
        parts[-1].append(completion)
    return [part for part in parts if part]
