"""The SQLite backend: ``SqliteStore`` on one file, and its migrations (``migrate``)."""

from __future__ import annotations

from .migrate import upgrade
from .store import SqliteStore

__all__ = ["SqliteStore", "upgrade"]
