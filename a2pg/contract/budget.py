"""What one call carries, summed as its arguments are checked; past a per-call limit, refused."""

from __future__ import annotations

from ..errors import A2Error, invalid
from .limits import Limits


def _over_call(what: str, limit: int, setting: str) -> A2Error:
    """``what`` reads "<verb> {limit} <noun>": the call <verb>s more than the limit allows."""
    said = what.format(limit=limit)
    return invalid(f"the call {said} in all, over the limit Limits.{setting}={limit}")


class OffLoop(Exception):
    """The call carries more than its check may encode on the event loop (``loop_bytes``):
    the front checks it again, whole, in a worker thread. Never reaches a caller."""


class CallBudget:
    """Events, bytes and targets one call has carried so far.

    Each ``spend_*`` raises as soon as the running total passes its limit, so a
    call of a thousand 1 MiB payloads is refused after reading about
    ``Limits.max_call_bytes`` of them, not after encoding all of them.

    ``loop_bytes`` (None: no bound) is how many bytes of JSON the check may walk and
    encode where it runs, the event loop: ``room`` bounds each value's walk by what is
    left of it, and a value that does not fit raises ``OffLoop``.
    """

    __slots__ = ("_limits", "bytes", "events", "loop_bytes", "targets")

    def __init__(self, limits: Limits, loop_bytes: int | None = None) -> None:
        self._limits = limits
        self.loop_bytes = loop_bytes
        self.events = 0
        self.bytes = 0
        self.targets = 0

    def room(self, max_bytes: int) -> int:
        """The most bytes the next value may encode to here: its limit, or less when the
        check runs on the event loop and has spent most of ``loop_bytes``."""
        loop_bytes = self.loop_bytes
        if loop_bytes is None:
            return max_bytes
        return min(max_bytes, loop_bytes - self.bytes)

    def spend_events(self, count: int) -> None:
        self.events += count
        if self.events > self._limits.max_call_events:
            raise _over_call(
                "appends more than {limit} events", self._limits.max_call_events, "max_call_events"
            )

    def spend_bytes(self, size: int) -> None:
        self.bytes += size
        if self.bytes > self._limits.max_call_bytes:
            raise _over_call(
                "writes more than {limit} bytes", self._limits.max_call_bytes, "max_call_bytes"
            )

    def spend_targets(self, count: int) -> None:
        self.targets += count
        if self.targets > self._limits.max_targets:
            raise _over_call(
                "names more than {limit} targets", self._limits.max_targets, "max_targets"
            )
