"""The operator commands: bulk and single ``redrive``, retention (``clear``, ``reclaim``),
the consumer registry (``consumers``) and live workers (``workers``).

Like every command module, each adds its parsers with ``add_parsers`` (through
``main.build_parser``'s ``command``) and names its implementations in ``COMMANDS``;
the database is opened only inside them.
"""

from __future__ import annotations

from ..common import AddCommand, Command
from . import consumers, redrive, retention, workers

MODULES = (redrive, retention, consumers, workers)


def add_parsers(command: AddCommand) -> None:
    """``redrive``, ``clear``, ``reclaim``, ``consumers``, ``workers``, in that order."""
    for module in MODULES:
        module.add_parsers(command)


COMMANDS: dict[str, Command] = {
    name: run for module in MODULES for name, run in module.COMMANDS.items()
}
