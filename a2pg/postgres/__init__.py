"""The PostgreSQL backend: ``PostgresStore`` on psycopg 3, and its migrations."""

from __future__ import annotations

from .connect import configure_connection
from .errors import CallTimeout
from .store import PostgresStore

__all__ = ["CallTimeout", "PostgresStore", "configure_connection"]
