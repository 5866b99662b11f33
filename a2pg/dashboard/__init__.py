"""The a2pg web dashboard (``pip install 'a2pg[dashboard]'``): ``a2pg dashboard``, or
``create_app(store)`` to mount it in an ASGI server of your own."""

from __future__ import annotations

from .app import create_app
from .security import Auth

__all__ = ["Auth", "create_app"]
