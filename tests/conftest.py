"""Suite-wide hooks: mark PostgreSQL tests, count them, and fail their skips in CI.

The store fixtures every backend-parametrized suite uses live in ``tests/backends.py``.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

from a2pg.testing import POSTGRES_FIXTURES

pytest_plugins = ["tests.backends", "pytester"]

_NEEDS_POSTGRES = POSTGRES_FIXTURES | {"private_postgres"}
Outcomes = dict[str, set[str]]
_OUTCOMES = pytest.StashKey[Outcomes]()


def _outcomes(config: pytest.Config) -> Outcomes:
    empty: Outcomes = {"ran": set(), "skipped": set()}
    return config.stash.setdefault(_OUTCOMES, empty)


SOAK_ENV = "A2PG_SOAK"
FULL_ENV = "A2PG_FULL"
FAST_DEFAULT_LEAVES_OUT = ("generated", "slow")
"""What a bare ``pytest`` (or ``scripts/test``) leaves out, for a run of minutes: the
generated suites and the slow concurrency and fault tests. ``.ci/run`` runs them (it
sets ``A2PG_FULL=1``), as does naming them: ``-m generated``, ``-m slow``, a path."""


def _deselect(config: pytest.Config, items: list[pytest.Item], markers: tuple[str, ...]) -> None:
    """Deselects (never skips: CI fails skips) the items carrying any of ``markers``."""
    left_out = [i for i in items if any(i.get_closest_marker(m) for m in markers)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [i for i in items if not any(i.get_closest_marker(m) for m in markers)]


def fast_default(config: pytest.Config) -> bool:
    """A bare run: no paths (pytest took its testpaths), no ``-m``, no ``A2PG_FULL=1``."""
    return (
        os.environ.get(FULL_ENV) != "1"
        and not config.option.markexpr
        and config.args_source == pytest.Config.ArgsSource.TESTPATHS
    )


@pytest.hookimpl(tryfirst=True)  # before `-m postgres` selects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _NEEDS_POSTGRES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)
    if os.environ.get(SOAK_ENV) != "1":  # long variants: deselected, not skipped
        _deselect(config, items, ("soak",))
    if fast_default(config):
        _deselect(config, items, FAST_DEFAULT_LEAVES_OUT)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if item.get_closest_marker("postgres") is None or hasattr(report, "wasxfail"):
        return report
    outcomes = _outcomes(item.config)
    if report.skipped:
        outcomes["skipped"].add(item.nodeid)
        if os.environ.get("CI") == "true":
            report.outcome = "failed"
            report.longrepr = f"a PostgreSQL test was skipped in CI: {report.longrepr}"
    elif report.when == "call":
        outcomes["ran"].add(item.nodeid)
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    outcomes = _outcomes(terminalreporter.config)
    terminalreporter.write_line(
        f"a2pg: {len(outcomes['ran'])} PostgreSQL tests ran, {len(outcomes['skipped'])} skipped"
    )
    if fast_default(terminalreporter.config):
        terminalreporter.write_line(
            "a2pg: the fast default left out the generated and slow tests; "
            f"{FULL_ENV}=1 (as .ci/run) runs them too"
        )
