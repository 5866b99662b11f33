"""The operator commands: bulk and single ``redrive``, retention (``clear``, ``reclaim``),
cancelling live heads (``cancel``), backfills (``backfill``), the consumer registry
(``consumers``), pauses (``pause``, ``resume``) and live workers
(``workers``).

Like every command module, each adds its parsers with ``add_parsers`` (through
``main.build_parser``'s ``command``) and names its implementations in ``COMMANDS``;
the database is opened only inside them.
"""

from __future__ import annotations

from ..common import AddCommand, Command
from . import cancel, consumers, pause, redrive, retention, workers

MODULES = (redrive, cancel, retention, consumers, pause, workers)


def add_parsers(command: AddCommand) -> None:
    """``redrive``, ``cancel``, ``backfill``, ``clear``, ``reclaim``, ``consumers``,
    ``pause``, ``resume``, ``workers``, in that order."""
    for module in MODULES:
        module.add_parsers(command)


COMMANDS: dict[str, Command] = {
    name: run for module in MODULES for name, run in module.COMMANDS.items()
}
