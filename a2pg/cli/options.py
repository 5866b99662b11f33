"""Command-line options derived from a settings dataclass, and parsed args turned back into it."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, TypeVar

from .common import EXIT_USAGE, fail

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")

HELP = "help"
"""The ``field(metadata=...)`` key of a field's one-line description."""


def _number(convert: Callable[[str], Any], text: str, what: str) -> Any:
    """``convert(text)``, or the one-line usage error argparse shows (not "invalid
    positive_int value", which names a function the user never sees)."""
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None


def positive_int(text: str) -> int:
    value: int = _number(int, text, "a whole number of 1 or more")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_float(text: str) -> float:
    value: float = _number(float, text, "a number of 0 or more")
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def positive_float(text: str) -> float:
    value: float = _number(float, text, "a number greater than 0")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value}")
    return value


PARSERS: dict[object, Callable[[str], object]] = {
    int: positive_int,
    float: positive_float,
    float | None: positive_float,
    str: str,
}
"""How an option's text becomes its field's value, by the field's type. Every count and
number of seconds among these settings must be positive, so the parsers say so (an
optional number of seconds left out keeps its default, None)."""


def option_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_options(
    parser: argparse.ArgumentParser,
    settings: type[DataclassInstance],
    *,
    skip: Collection[str] = (),
) -> None:
    """One option per field of ``settings`` (``claim_batch`` gives ``--claim-batch``), typed
    by the field's type, defaulting to its default (None for one derived from others),
    with the field's ``metadata["help"]``; ``skip`` names fields the caller maps itself."""
    types = typing.get_type_hints(settings)
    specs = [spec for spec in dataclasses.fields(settings) if spec.init and spec.name not in skip]
    for spec in specs:  # all checked before any is added
        if types[spec.name] not in PARSERS:
            raise TypeError(f"no option type for {settings.__name__}.{spec.name}")
    for spec in specs:
        parser.add_argument(
            option_name(spec.name),
            type=PARSERS[types[spec.name]],
            default=None if spec.default is dataclasses.MISSING else spec.default,
            help=spec.metadata.get(HELP),
        )


def from_args(settings: type[C], args: argparse.Namespace, **given: Any) -> C:
    """``settings`` from the options ``add_options`` added (``given`` overrides or supplies
    skipped fields); a value the dataclass refuses is a usage error."""
    values = {
        spec.name: getattr(args, spec.name)
        for spec in dataclasses.fields(settings)
        if spec.init and hasattr(args, spec.name)
    }
    try:
        return settings(**{**values, **given})
    except ValueError as exc:
        fail(EXIT_USAGE, str(exc))


def add_mode_options(
    parser: argparse.ArgumentParser, settings: type[DataclassInstance], mode: str
) -> None:
    """One option per field of ``settings``, the settings of one mode of a command
    (``bench --versus``): None in the namespace, so that one given without the mode is
    seen (``given_options``), and the default named in the help."""
    types = typing.get_type_hints(settings)
    for spec in dataclasses.fields(settings):
        default = spec.default
        shown = f"{default:,}" if isinstance(default, int) else default
        parser.add_argument(
            option_name(spec.name),
            type=PARSERS[types[spec.name]],
            default=None,
            help=f"with {mode}: {spec.metadata[HELP]} (default: {shown})",
        )


def given_options(settings: type[DataclassInstance], args: argparse.Namespace) -> list[str]:
    """The options of ``add_mode_options`` given on the command line, as typed."""
    return [
        option_name(spec.name)
        for spec in dataclasses.fields(settings)
        if getattr(args, spec.name, None) is not None
    ]


def from_given(settings: type[C], args: argparse.Namespace) -> C:
    """``settings`` from the options of ``add_mode_options`` given, defaults for the rest;
    a value the dataclass refuses is a usage error."""
    given = {
        spec.name: getattr(args, spec.name)
        for spec in dataclasses.fields(settings)
        if getattr(args, spec.name, None) is not None
    }
    try:
        return settings(**given)
    except ValueError as exc:
        fail(EXIT_USAGE, str(exc))
