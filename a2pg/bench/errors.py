"""The one error of ``a2pg bench``: a measurement that could not finish."""

from __future__ import annotations


class BenchFailed(RuntimeError):
    """A measurement could not finish (processes did not start, a drain stalled, a
    connection failed); the CLI exits 1 with its message."""
