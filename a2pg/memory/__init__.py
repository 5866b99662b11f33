"""MemoryStore: the in-memory reference model of the a2pg store contract."""

from __future__ import annotations

from .store import MemoryStore

__all__ = ["MemoryStore"]
