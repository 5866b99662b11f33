"""``a2pg worker MODULE:APP``: find the ``App`` a target names, or say in one line why not.

Every way a target can be wrong is a usage error (exit 2) before the worker touches the
database: no colon, a module that is missing or fails to import, a missing attribute,
something that is not an ``App`` (nor a zero-argument factory returning one), an ``App``
with no consumers.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import sysconfig
import traceback
from pathlib import Path
from typing import Any

from ..worker import App
from .common import EXIT_USAGE, fail


def load_app(spec: str) -> App:
    """The ``App`` named by ``module:attribute`` (a zero-argument factory returning one works too).

    The current directory is importable, as with ``python -m``, so ``a2pg worker
    jobs:app`` finds ``./jobs.py``.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        fail(EXIT_USAGE, f"expected MODULE:APP (like myproject.jobs:app), got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    target = _attribute(_import(module_name), module_name, attr)
    app = _as_app(target, spec)
    if not app.consumers:
        fail(EXIT_USAGE, f"{spec} has no consumers: add one with @app.consumer(NAME)")
    return app


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            fail(EXIT_USAGE, f"cannot import module {module_name!r}: {exc}")
        fail(EXIT_USAGE, f"importing module {module_name!r} failed: {gist(exc)}")
    except (Exception, SystemExit) as exc:  # its own code raised: one line, not a traceback
        fail(EXIT_USAGE, f"importing module {module_name!r} failed: {gist(exc)}")


def _attribute(module: Any, module_name: str, attr: str) -> Any:
    target = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            fail(EXIT_USAGE, f"module {module_name!r} has no attribute {attr!r}")
        except Exception as exc:  # a property or module __getattr__ that raised
            fail(EXIT_USAGE, f"reading {module_name}:{attr} failed: {gist(exc)}")
    return target


def _as_app(target: Any, spec: str) -> App:
    """``target`` itself, or what it returns when it is a factory taking no arguments."""
    if isinstance(target, App):
        return target
    if not _takes_no_arguments(target):
        fail(EXIT_USAGE, f"{spec} is a {type(target).__name__}, not an a2pg App")
    try:
        made = target()
    except (Exception, SystemExit) as exc:
        fail(EXIT_USAGE, f"calling {spec}() failed: {gist(exc)}")
    if not isinstance(made, App):
        fail(EXIT_USAGE, f"{spec}() returned a {type(made).__name__}, not an a2pg App")
    return made


def _takes_no_arguments(target: Any) -> bool:
    """Whether ``target`` is callable without arguments; ``json:loads`` is not, and neither
    is anything whose signature cannot be read (it is not called on a guess)."""
    if not callable(target):
        return False
    try:
        inspect.signature(target).bind()
    except (TypeError, ValueError):
        return False
    return True


def gist(exc: BaseException) -> str:
    """``Type: first line of the message (at file:line)``: where and why, on one line."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0].strip()}" if lines else type(exc).__name__
    if isinstance(exc, SyntaxError):  # it names its file and line itself
        return text
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _user_code(f.filename)]
    if frames:
        text += f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return text


def _resolved(path: str) -> str:
    return str(Path(path).resolve())


_PATHS = sysconfig.get_paths()
_STDLIB = _resolved(_PATHS["stdlib"])
_INSTALLED = tuple({_resolved(_PATHS["purelib"]), _resolved(_PATHS["platlib"])})
_HERE = _resolved(str(Path(__file__).parent))


def _user_code(filename: str) -> bool:
    """Whether a frame is the app's code (or a package it uses), not Python's importing
    machinery, the standard library or this module: where the app went wrong."""
    if filename.startswith("<"):
        return False
    path = _resolved(filename)
    if path.startswith(_HERE):
        return False
    return path.startswith(_INSTALLED) or not path.startswith(_STDLIB)
