"""``PollingOnly``: a store whose wakeups never fire, so a worker finds work by polling alone."""

from __future__ import annotations

from ..front import StoreProxy
from ..wakeups import Subscription, Wakeups


class _Silence:
    """A wakeups source that never signals and never closes: its ``Wakeups`` wait until
    closed themselves."""

    closed = False

    def start(self) -> None:
        """Nothing to start."""

    def unsubscribe(self, subscriber: Wakeups) -> None:
        """Nothing to forget: nothing was kept."""


class PollingOnly(StoreProxy):
    """The wrapped store with ``wakeups()`` that never yield (until closed), so a worker
    finds work by polling alone: ``a2pg worker --no-listen`` and the polling-only wake
    latency of ``a2pg bench`` (what a worker behind a transaction-mode pooler, where
    LISTEN never fires, would see). Every other call is the wrapped store's own."""

    def wakeups(self) -> Subscription:
        """Never yields; ends when closed (``aclose()``)."""
        return Wakeups(_Silence())
