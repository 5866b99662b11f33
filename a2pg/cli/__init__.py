"""The ``a2pg`` command line; ``a2pg.cli:main`` is the console script."""

from __future__ import annotations

from .main import main

__all__ = ["main"]
