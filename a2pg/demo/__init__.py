"""``a2pg demo``: a chat workload on worker processes, verified afterwards.

``a2pg worker a2pg.demo:app`` runs its consumers.
"""

from __future__ import annotations

from .config import DemoConfig
from .run import DemoFailed, DemoRun, app, run_demo

__all__ = ["DemoConfig", "DemoFailed", "DemoRun", "app", "run_demo"]
