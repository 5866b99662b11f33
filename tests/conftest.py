"""Suite-wide hooks: mark PostgreSQL tests, count them, and fail their skips in CI.

The store fixtures every backend-parametrized suite uses live in ``tests/backends.py``.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest

from a2pg.testing import POSTGRES_FIXTURES

pytest_plugins = ["tests.backends", "tests.citus_cluster", "pytester"]

_NEEDS_POSTGRES = POSTGRES_FIXTURES | {"private_postgres"}
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
    _deselect_not_on_citus(config, items)


NOT_ON_CITUS = Path(__file__).parent / "citus" / "not_on_citus.txt"
"""The shared suites' tests the ``citus`` backend leaves out, one per line with why: those
whose contract Citus does not keep (a stated guarantee replaces them, tested in
tests/citus) and those the store does not pass on Citus yet."""


def not_on_citus() -> dict[str, str]:
    """Test (path::name) -> why, from :data:`NOT_ON_CITUS`."""
    found: dict[str, str] = {}
    for line in NOT_ON_CITUS.read_text(encoding="utf-8").splitlines():
        test, _, why = line.partition("  # ")
        if test.strip() and not test.lstrip().startswith("#"):
            found[test.strip()] = why.strip()
    return found


def _deselect_not_on_citus(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselects (never skips) the ``citus`` backend's runs of the tests listed."""
    listed = not_on_citus()

    def left_out(item: pytest.Item) -> bool:
        callspec = getattr(item, "callspec", None)
        if callspec is None or getattr(callspec.params.get("backend"), "name", None) != "citus":
            return False
        return item.nodeid.split("[", 1)[0] in listed

    out = [item for item in items if left_out(item)]
    if out:
        config.hook.pytest_deselected(items=out)
        items[:] = [item for item in items if not left_out(item)]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if item.get_closest_marker("postgres") is None or hasattr(report, "wasxfail"):
        return report
    if report.skipped and os.environ.get("CI") == "true":
        report.user_properties.append(("a2pg_skipped", True))  # counted as skipped
        report.outcome = "failed"
        report.longrepr = f"a PostgreSQL test was skipped in CI: {report.longrepr}"
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # From the reports, which reach the main process also when pytest-xdist runs the tests.
    ran: set[str] = set()
    skipped: set[str] = set()
    for reports in terminalreporter.stats.values():
        for report in reports:
            if not isinstance(report, pytest.TestReport) or "postgres" not in report.keywords:
                continue
            if hasattr(report, "wasxfail"):
                continue
            if report.skipped or ("a2pg_skipped", True) in report.user_properties:
                skipped.add(report.nodeid)
            elif report.when == "call":
                ran.add(report.nodeid)
    terminalreporter.write_line(f"a2pg: {len(ran)} PostgreSQL tests ran, {len(skipped)} skipped")
    if fast_default(terminalreporter.config):
        terminalreporter.write_line(
            "a2pg: the fast default left out the generated and slow tests; "
            f"{FULL_ENV}=1 (as .ci/run) runs them too"
        )
