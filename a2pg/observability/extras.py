"""The optional dependencies behind ``a2pg[metrics]`` and ``a2pg[otel]``, imported on use."""

from __future__ import annotations

import importlib
from types import ModuleType

EXTRAS = {
    "metrics": "prometheus-client",
    "otel": "opentelemetry-api",
}
"""Each extra and the distribution it installs."""


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the ``pip install``."""

    def __init__(self, extra: str, what: str) -> None:
        self.extra = extra
        super().__init__(
            f"{what} needs {EXTRAS[extra]}, which is not installed: pip install 'a2pg[{extra}]'"
        )


def require(module: str, extra: str, what: str) -> ModuleType:
    """``module`` imported, or ``MissingExtra`` saying which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(extra, what) from exc


def available(module: str) -> bool:
    """Whether ``module`` imports (an optional dependency is installed)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
