"""A module that imports a package that is not installed."""

from __future__ import annotations

import importlib

importlib.import_module("a2pg_no_such_dependency")
