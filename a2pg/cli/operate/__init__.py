"""The operator commands: bulk and single ``redrive``, retention (``clear``, ``reclaim``),
cancelling live heads (``cancel``), backfills (``backfill``), the attempt history
(``attempts``, ``prune-attempts``), the consumer registry
(``consumers``), pauses (``pause``, ``resume``), live workers
(``workers``) and the audit log of all of them (``audit``).

Like every command module, each adds its parsers with ``add_parsers`` (through
``main.build_parser``'s ``command``) and names its implementations in ``COMMANDS``;
the database is opened only inside them.
"""

from __future__ import annotations

from ..common import AddCommand, Command
from . import attempts, audit, cancel, consumers, pause, redrive, retention, workers

MODULES = (redrive, cancel, attempts, retention, consumers, pause, workers, audit)


def add_parsers(command: AddCommand) -> None:
    """``redrive``, ``cancel``, ``backfill``, ``attempts``, ``prune-attempts``, ``clear``,
    ``reclaim``, ``consumers``, ``pause``, ``resume``, ``workers``, ``audit``, in that
    order."""
    for module in MODULES:
        module.add_parsers(command)


COMMANDS: dict[str, Command] = {
    name: run for module in MODULES for name, run in module.COMMANDS.items()
}
