"""Reading query and form values: a bad one is a 400 naming it, never a 500."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException

MAX_TEXT = 1024
"""Longest text a filter or id field may hold (store names are shorter still)."""


def bad_request(message: str) -> HTTPException:
    return HTTPException(400, message)


def text(values: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = values.get(name)
    if value is None or value == "":
        if required:
            raise bad_request(f"missing {name}")
        return None
    if not isinstance(value, str):
        raise bad_request(f"{name} must be text")
    if len(value) > MAX_TEXT:
        raise bad_request(f"{name} is longer than {MAX_TEXT} characters")
    return value


def integer(
    values: Mapping[str, Any], name: str, *, minimum: int = 0, required: bool = False
) -> int | None:
    raw = text(values, name, required=required)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise bad_request(f"{name} must be at least {minimum}, got {value}")
    if value >= 2**63:
        raise bad_request(f"{name} is too large")
    return value


def local_path(value: str | None, default: str) -> str:
    """A path inside the dashboard to go back to after an action (never another site)."""
    if value is None or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return default
    return value
