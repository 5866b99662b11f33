"""The PostgreSQL backend: ``PostgresStore`` on psycopg 3, and its migrations."""

from __future__ import annotations

from .connect import configure_connection
from .store import PostgresStore

__all__ = ["PostgresStore", "configure_connection"]
