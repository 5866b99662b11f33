"""``a2pg dashboard --wait SECONDS``: a dashboard started before its database waits for
it, a warning per try, then serves; still down after SECONDS, it exits 3 (an outage).
And ``/readyz`` follows a real server that goes away under a running dashboard."""

from __future__ import annotations

import logging
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from a2pg.postgres.migrate import upgrade
from a2pg.testing import EmbeddedPostgres, create_database, unique_name
from tests.cli.conftest import Cli, closed_port_dsn, run_script

from .processes import _SERVING, A2PG, ROOT, _env, _stop

SLACK = 1.5
"""Seconds of scheduling slack a loaded 2-core machine may add to any timing."""
NOT_READY = re.compile(r"not ready: (database unavailable|the store did not answer within 0\.8s)\n")
RETRY_LINE = re.compile(r"cannot reach the database at (\S+) \(try (\d+): .*\); next try in ")


def test_help_shows_the_option(cli: Cli) -> None:
    detail = cli("dashboard", "--help")
    assert "--wait SECONDS" in detail.out and "/readyz" in detail.out


@pytest.mark.parametrize("value", ["-1", "inf", "soon", "nan"])
def test_a_bad_wait_exits_2(cli: Cli, value: str) -> None:
    result = cli("dashboard", "--dsn", closed_port_dsn(), "--port", "0", "--wait", value)
    assert result.code == 2
    assert "--wait" in result.err


def test_without_wait_an_unreachable_database_exits_3_at_once(cli: Cli) -> None:
    started = time.monotonic()
    result = cli("dashboard", "--dsn", closed_port_dsn(), "--port", "0")
    assert result.code == 3, result.err
    assert time.monotonic() - started < SLACK
    assert result.err.startswith("a2pg: error: cannot reach the database at postgres@127.0.0.1:")


def test_wait_retries_with_a_warning_each_then_exits_3(
    cli: Cli, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    dsn = closed_port_dsn()
    started = time.monotonic()
    result = cli("dashboard", "--dsn", dsn, "--port", "0", "--wait", "3")
    took = time.monotonic() - started
    assert result.code == 3
    assert 3.0 <= took < 3.0 + SLACK
    assert "after waiting 3s" in result.err and result.err.count("\n") == 1
    assert "serving on" not in result.out
    tries = [m for r in caplog.records if (m := RETRY_LINE.search(r.getMessage()))]
    assert [int(m.group(2)) for m in tries] == list(range(1, len(tries) + 1))
    assert len(tries) >= 3  # 0.25 s, then doubling up to 2 s: never silent long
    assert {m.group(1) for m in tries} == {dsn.removeprefix("postgresql://")}


def test_wait_does_not_hide_a_database_that_is_there_but_unmigrated(
    postgres_server_dsn: str,
) -> None:
    from a2pg.testing import scratch_database

    started = time.monotonic()
    with scratch_database(postgres_server_dsn) as empty:
        result = run_script("dashboard", "--dsn", empty, "--port", "0", "--wait", "30")
    assert result.code == 4  # not an outage: at once, however long it may wait
    assert time.monotonic() - started < 10


def test_a_password_stays_out_of_the_retry_lines(
    cli: Cli, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    dsn = closed_port_dsn().replace("postgres@", "postgres:hunter2@")
    result = cli("dashboard", "--dsn", dsn, "--port", "0", "--wait", "0.6")
    assert result.code == 3
    assert "hunter2" not in result.err + caplog.text
    assert RETRY_LINE.search(caplog.text)


# --- a real process and a server that comes and goes ------------------------------------


def _status(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _until(check: Callable[[], bool], what: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_dashboard_waits_for_a_server_that_comes_up_and_is_unready_while_it_is_away(
    private_postgres: EmbeddedPostgres, tmp_path: Path
) -> None:
    dsn = create_database(private_postgres.dsn(), unique_name("a2pg_dash_wait"))
    upgrade(dsn)
    private_postgres.stop()
    err = (tmp_path / "dashboard.err").open("w+")
    proc = subprocess.Popen(
        [str(A2PG), "dashboard", "--dsn", dsn, "--port", "0", "--wait", "60"],
        cwd=ROOT,
        env=_env(None),
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
    )
    urls: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if found := _SERVING.search(line):
                urls.append(found.group(1))

    threading.Thread(target=read, daemon=True).start()
    try:
        time.sleep(2.0)  # started while the server is down: it waits, saying so
        assert proc.poll() is None, "the dashboard gave up instead of waiting"
        assert urls == []
        private_postgres.start()
        _until(lambda: bool(urls), "the dashboard to serve once the server is up")
        url = urls[0]
        assert _status(url + "readyz") == (200, "ready\n")
        assert _status(url + "healthz") == (200, "ok\n")

        private_postgres.stop()  # the database goes away under the running dashboard
        _until(lambda: _status(url + "readyz")[0] == 503, "/readyz to say not ready")
        # Refused at once, or a pool still trying to reconnect: either way not ready, fast.
        started = time.monotonic()
        status, text = _status(url + "readyz")
        assert status == 503 and NOT_READY.fullmatch(text), text
        assert time.monotonic() - started < 0.8 + 2 * SLACK
        assert _status(url + "healthz") == (200, "ok\n")

        private_postgres.start()
        _until(lambda: _status(url + "readyz")[0] == 200, "/readyz to recover")
        assert _stop(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err.seek(0)
    log = err.read()
    assert "Traceback" not in log, log
    assert len(RETRY_LINE.findall(log)) >= 2, log
    assert re.search(r"connected to postgres@127\.0\.0\.1:\d+/a2pg_dash_wait_\w+ after", log)
