"""What the one phase sequence of ``a2pg bench`` (``run.py``) needs of a backend beyond its
site: its ceiling, its ledger, how its figures read, and the phases only it runs.

The site (``a2pg.backends``) opens the stores, migrates, and tells the worker processes
where to go; a side (``postgres_side.py``, ``sqlite_side.py``) is what the bench itself
measures differently on each: the raw write ceiling, the tables' counts, the machine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from ..backends import Site
from .phases import Ledger


@dataclass(frozen=True, slots=True)
class Shape:
    """How one backend's figures read."""

    ceiling: Callable[[int], str]
    """The name of the ceiling figure on N (``commit ceiling, N=4``)."""
    writers: Callable[[int, int], int]
    """The ceiling's N for P processes of C connections each: the transactions that can
    write at once (P x C on PostgreSQL, P writer processes on one SQLite file)."""
    wake: tuple[str, str]
    """The key and words of the wake latency with the backend's signal (``notify``)."""
    memory: bool
    """Whether the memory phase runs (a drain by one fresh process, its peak RSS)."""
    history: bool
    """Whether the history phase runs (the side's ``histories``)."""
    targets: bool
    """Whether the figures are held to their targets (PostgreSQL's)."""
    no_sync: str | None = None
    """Why ``--sync off`` is refused here (None: it applies)."""


@dataclass(frozen=True, slots=True)
class History:
    """A store beside the bench's, holding ``size`` completed events already."""

    key: str
    size: int
    site: Site


class Side(Protocol):
    """One backend's part of a bench run, between ``running`` and its end."""

    @property
    def shape(self) -> Shape: ...

    @property
    def server(self) -> str:
        """The database, for the report (``PostgreSQL 15.4``); known once running."""
        ...

    def running(self, log: TextIO) -> AbstractAsyncContextManager[dict[str, Any]]:
        """Migrates, sets up (scratch ceiling, histories), yields the machine's facts;
        removes what it set up at the end."""
        ...

    async def ceiling(self, n: int, seconds: float) -> float:
        """Commits/s of N writers, all starting at once."""
        ...

    def ledger(self, site: Site) -> Ledger:
        """The counts a phase reads of its sessions in ``site`` (the bench's, a history)."""
        ...

    @property
    def histories(self) -> Sequence[History]:
        """The history stores (none where the backend has no history phase)."""
        ...

    async def forget(self, history: History, ids: Sequence[str]) -> None:
        """Deletes a drained backlog from a history store, so each run drains beside the
        same history."""
        ...

    def ceiling_report(self) -> dict[str, str]:
        """``shape``, ``how`` and ``n`` of the report's ``ceiling``."""
        ...
