"""A module whose import fails, as an app's does when its configuration is missing."""

from __future__ import annotations

raise RuntimeError("DATABASE_URL is not set\nsecond line of detail")
