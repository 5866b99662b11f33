"""The state machine's plumbing: run a call on both stores, compare, remember what they showed.

``rules.StoreModel`` adds one rule per Store operation. Each rule calls ``both``, which
insists on the same result (or the same ``A2Error`` code) from memory and the candidate
backend (PostgreSQL or SQLite);
after every step the invariant compares everything observable. Rules draw their
arguments from the universe and from what the stores showed so far (remembered
attempts, heads, dead letters, session heads).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from hypothesis import event
from hypothesis.stateful import RuleBasedStateMachine, invariant

from a2pg import AttemptRef, Cursor, Head, SessionInfo
from a2pg.store import Store

from . import universe as u
from .observe import Folds, observe
from .pair import Failed, Ok, Outcome, Pair

T = TypeVar("T")

Pick = tuple[int, int]
"""``(pick, delta)``: a remembered attempt, and what to add to its attempt number."""


def differ(what: str, memory: object, other: object, name: str = "postgres") -> AssertionError:
    return AssertionError(f"{what} differs:\n  memory:   {memory!r}\n  {name + ':':9} {other!r}")


def label(result: Outcome[Any]) -> str:
    """A short name of an outcome, for hypothesis' statistics."""
    if isinstance(result, Failed):
        return result.code
    value = result.value
    if isinstance(value, list):
        return "list" if value else "empty list"
    return type(value).__name__


class ModelMachine(RuleBasedStateMachine):
    """Both stores, what they showed after the last step, and what the steps handed out."""

    def __init__(self, pair: Pair) -> None:
        super().__init__()
        self.pair = pair
        pair.reset()
        self.attempts: list[tuple[str, AttemptRef]] = []
        """Every attempt a claim handed out, oldest first: what rules complete, fail, renew."""
        self.snapshot_bounds: dict[tuple[str, str], set[int]] = {}
        """The indexes of snapshot writes, by session and reducer: where history may be kept."""
        self.view: dict[str, Outcome[Any]] = {}
        """Memory's observation after the last step, by part (see ``observe``)."""

    # -- running and comparing -------------------------------------------------------------

    def both(self, what: str, call: Callable[[Store], Awaitable[T]]) -> Outcome[T]:
        """Runs ``call`` on both stores and insists on the same outcome; returns memory's."""
        memory, other = self.pair.both(call)
        if memory != other:
            raise differ(what, memory, other, self.pair.name)
        event(f"{what}: {label(memory)}")
        return memory

    @invariant()
    def everything_observable_agrees(self) -> None:
        folds = [Folds(s, r, (None, *sorted(b))) for (s, r), b in self.snapshot_bounds.items()]
        memory = self.pair.run(observe(self.pair.memory, folds))
        other = self.pair.run(observe(self.pair.other, folds))
        for name, part in memory.items():
            if part != other[name]:
                raise differ(name, part, other[name], self.pair.name)
        self.view = memory

    # -- what the stores showed ------------------------------------------------------------

    def seen(self, part: str) -> list[Any]:
        """A listing of the last observation (empty if it failed)."""
        found = self.view.get(part)
        return list(found.value) if isinstance(found, Ok) else []

    def info(self, session_id: str) -> SessionInfo:
        for info in self.seen("sessions()"):
            if info.session_id == session_id:
                assert isinstance(info, SessionInfo)
                return info
        return SessionInfo(session_id, 0, 0, 0, 0)

    def cursors(self, session_id: str) -> list[Cursor]:
        return self.seen(f"cursors({session_id})")

    def dead_letters(self, session_id: str) -> list[Head]:
        return self.seen(f"dead_letters({session_id})")

    def has_cursors(self) -> bool:
        return any(self.cursors(s) for s in u.SESSIONS)

    def has_cleared(self) -> bool:
        return any(self.info(s).clear_index for s in u.SESSIONS)

    def has_events(self) -> bool:
        return any(self.info(s).head for s in u.SESSIONS)

    def has_dead_letters(self) -> bool:
        return bool(self.seen("find_dead_letters()"))

    # -- what the steps handed out ---------------------------------------------------------

    def has_attempts(self) -> bool:
        return bool(self.attempts)

    def attempt(self, pick: Pick, session_id: str | None = None) -> tuple[str, AttemptRef]:
        """A remembered attempt (of ``session_id`` when it has any; ``pick[0]`` counts back
        from the latest), its number shifted by ``pick[1]``."""
        index, delta = pick
        pool = [a for a in self.attempts if session_id is None or a[0] == session_id]
        if not pool:
            pool = self.attempts or [(session_id or u.SESSIONS[0], AttemptRef(u.JOB, None, 1, 1))]
        found_in, ref = pool[-1 - index % len(pool)]
        attempt = max(1, ref.attempt + delta)  # attempt 0 is the contract layer's business
        return found_in, AttemptRef(ref.consumer, ref.lane, ref.index, attempt)

    def remember(self, heads: Sequence[Head]) -> None:
        for head in heads:
            entry = (head.session_id, head.attempt_ref)
            if entry not in self.attempts:
                self.attempts.append(entry)
