"""Renders any value for an error message: short, without recursion, never raising."""

from __future__ import annotations

import reprlib
from dataclasses import fields, is_dataclass
from datetime import date, datetime, time, timedelta

MAX_SHOWN = 120
"""Characters of a rendered value; anything longer is cut with ``...``."""

MAX_INT_BITS = 256
"""Ints wider than this are shown by their width: printing 10**5000 raises in Python."""

_PLAIN = (type(None), bool, float, complex, bytes, bytearray, date, datetime, time, timedelta)
"""Types whose own repr is safe to call (the result is cut to length)."""


class _Brief(reprlib.Repr):
    """``reprlib`` with small limits, that never calls a foreign ``__repr__``."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxstring = 60
        self.maxother = 60
        self.maxlong = 60
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = 6
        self.maxdict = self.maxdeque = self.maxarray = 6

    def repr_int(self, x: int, level: int) -> str:
        bits = x.bit_length()
        if bits > MAX_INT_BITS:
            return f"<int of {bits} bits>"
        return super().repr_int(x, level)

    def repr_dict(self, x: dict[object, object], level: int) -> str:
        """Like reprlib's, without sorting (and comparing) every key of a huge dict."""
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        shown = []
        for count, (key, value) in enumerate(x.items()):
            if count == self.maxdict:
                shown.append("...")
                break
            shown.append(f"{self.repr1(key, level - 1)}: {self.repr1(value, level - 1)}")
        return "{" + ", ".join(shown) + "}"

    def repr_instance(self, x: object, level: int) -> str:
        if isinstance(x, _PLAIN):
            if isinstance(x, bytes | bytearray):
                x = x[: self.maxstring]
            return _cut(repr(x), self.maxother)
        if is_dataclass(x) and not isinstance(x, type):
            if level <= 0:
                return f"{type_name(x)}(...)"
            shown = ", ".join(
                f"{spec.name}={self.repr1(getattr(x, spec.name, None), level - 1)}"
                for spec in fields(x)[:6]
            )
            return f"{type_name(x)}({shown})"
        return f"<{type_name(x)}>"


_BRIEF = _Brief()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def type_name(value: object) -> str:
    """The name of ``value``'s type, cut to a sane length."""
    return _cut(type(value).__name__, 60)


def show(value: object) -> str:
    """``value`` for an error message: at most ``MAX_SHOWN`` characters, nested values
    elided, huge ints by their width, foreign objects by their type name only (their
    ``__repr__`` may be slow, recursive or hostile)."""
    try:
        return _cut(_BRIEF.repr(value), MAX_SHOWN)
    except Exception:  # a hostile __eq__, __len__ or tzinfo inside a plain type
        return f"<{type_name(value)}>"
