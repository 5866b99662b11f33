"""``PollingOnly``: a store whose wakeups never fire, so a worker finds work by polling alone."""

from __future__ import annotations

from ..store import Presence, Store
from ..wakeups import Wakeups


class _Silence:
    """A wakeups source that never signals and never closes: its ``Wakeups`` wait until
    closed themselves."""

    closed = False

    def start(self) -> None:
        """Nothing to start."""

    def unsubscribe(self, subscriber: Wakeups) -> None:
        """Nothing to forget: nothing was kept."""


class PollingOnly:
    """The wrapped store with ``wakeups()`` that never yield (until closed), so a worker
    finds work by polling alone: ``a2pg worker --no-listen`` and the polling-only wake
    latency of ``a2pg bench`` (what a worker behind a transaction-mode pooler, where
    LISTEN never fires, would see). Everything else is the wrapped store's own method."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.append = store.append
        self.read = store.read
        self.wake_log = store.wake_log
        self.cursors = store.cursors
        self.claim_available = store.claim_available
        self.claim_any = store.claim_any
        self.renew_claims = store.renew_claims
        self.release_claims = store.release_claims
        self.complete_attempt = store.complete_attempt
        self.complete_attempts = store.complete_attempts
        self.complete_and_claim = store.complete_and_claim
        self.fail_attempt = store.fail_attempt
        self.dead_letters = store.dead_letters
        self.redrive = store.redrive
        self.read_state = store.read_state
        self.put_snapshots = store.put_snapshots
        self.clear = store.clear
        self.reclaim = store.reclaim
        self.stream = store.stream
        self.register_consumers = store.register_consumers
        self.unregister_consumers = store.unregister_consumers
        self.registered_consumers = store.registered_consumers
        self.sessions = store.sessions
        self.find_dead_letters = store.find_dead_letters
        self.consumer_stats = store.consumer_stats
        self.heartbeat = store.heartbeat
        self.forget_workers = store.forget_workers
        self.workers = store.workers
        self.close = store.close

    @property
    def presence(self) -> Presence:
        return self._store.presence

    def wakeups(self) -> Wakeups:
        """Never yields; ends when closed (``aclose()``)."""
        return Wakeups(_Silence())
