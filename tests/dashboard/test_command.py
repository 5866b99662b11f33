"""``a2pg dashboard`` and ``a2pg demo --dashboard`` as a user runs them: real processes,
real HTTP; bad settings exit at once with one line and the documented code."""

from __future__ import annotations

import signal
import socket
import subprocess
import urllib.request

import pytest

from tests.cli.conftest import Cli, run_script

from .processes import _SERVING, A2PG, ROOT, _env, dashboard


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_help_lists_the_command(cli: Cli) -> None:
    result = cli("--help")
    assert "dashboard" in result.err + result.out
    detail = cli("dashboard", "--help")
    assert detail.code == 0
    for option in ("--host", "--port", "--read-only", "--root-path", "A2PG_DASHBOARD_TOKEN"):
        assert option in detail.out


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"A2PG_DASHBOARD_TOKEN": ""}, "A2PG_DASHBOARD_TOKEN is set but empty"),
        ({"A2PG_DASHBOARD_BASIC": "nopassword"}, "A2PG_DASHBOARD_BASIC must be user:password"),
        # No client can send these: every request would be refused, with no hint why.
        (
            {"A2PG_DASHBOARD_TOKEN": "tok\n"},
            "A2PG_DASHBOARD_TOKEN must be printable ASCII without spaces (a trailing newline?)",
        ),
        (
            {"A2PG_DASHBOARD_TOKEN": "to k"},
            "A2PG_DASHBOARD_TOKEN must be printable ASCII without spaces (a trailing newline?)",
        ),
        (
            {"A2PG_DASHBOARD_TOKEN": "tök"},
            "A2PG_DASHBOARD_TOKEN must be printable ASCII without spaces (a trailing newline?)",
        ),
        (
            {"A2PG_DASHBOARD_BASIC": "ops:pw\n"},
            "A2PG_DASHBOARD_BASIC must not hold control characters (a trailing newline?)",
        ),
    ],
)
def test_bad_auth_settings_exit_2_before_connecting(env: dict[str, str], message: str) -> None:
    # The DSN points nowhere: the check must come first.
    result = run_script(
        "dashboard", "--dsn", "postgresql://postgres@127.0.0.1:1/nothing", "--port", "0", env=env
    )
    assert result.code == 2, result.err
    assert result.err == f"a2pg: error: {message}\n"


def test_a_taken_port_exits_1_before_connecting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = run_script(
            "dashboard", "--dsn", "postgresql://postgres@127.0.0.1:1/x", "--port", str(port)
        )
    assert result.code == 1
    assert result.err.startswith(f"a2pg: error: cannot listen on 127.0.0.1:{port}: ")
    assert len(result.err.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "must be 0-65535"),
        (["--root-path", "a2pg"], "must look like /prefix"),
        (["--root-path", "/a2pg/"], "must look like /prefix"),
        (["--refresh", "0"], "must be greater than 0"),
        (["--refresh", "inf"], "at most 86400"),
        (["--refresh", "1e300"], "at most 86400"),
    ],
)
def test_bad_options_exit_2(cli: Cli, args: list[str], message: str) -> None:
    result = cli("dashboard", "--dsn", "postgresql://postgres@127.0.0.1:1/x", *args)
    assert result.code == 2
    assert message in result.err


def test_no_database_exits_2(cli: Cli) -> None:
    result = cli("dashboard")
    assert result.code == 2
    assert "no database given" in result.err


def test_an_unmigrated_database_exits_4(postgres_server_dsn: str) -> None:
    from a2pg.testing import scratch_database

    with scratch_database(postgres_server_dsn) as empty:
        result = run_script("dashboard", "--dsn", empty, "--port", "0")
    assert result.code == 4
    assert "a2pg migrate" in result.err


def test_serves_behind_a_prefix_with_a_token(postgres_dsn: str) -> None:
    env = {"A2PG_DASHBOARD_TOKEN": "tok"}
    with dashboard(postgres_dsn, "--root-path", "/ops/a2pg", env=env) as url:
        assert url.endswith("/ops/a2pg")
        # A proxy strips the prefix before passing requests on; links keep it.
        base = url.removesuffix("/ops/a2pg")
        assert _get(base + "/sessions")[0] == 401
        status, page = _get(base + "/sessions", {"Authorization": "Bearer tok"})
        assert status == 200
        assert 'href="/ops/a2pg/static/dashboard.css"' in page
        assert 'href="/ops/a2pg/dead-letters"' in page


def test_demo_keeps_the_dashboard_open_on_its_data(postgres_dsn: str) -> None:
    proc = subprocess.Popen(
        [
            str(A2PG),
            "demo",
            "--dsn",
            postgres_dsn,
            "--sessions",
            "4",
            "--turns",
            "2",
            "--workers",
            "1",
            "--dashboard",
            "--dashboard-port",
            "0",
        ],
        cwd=ROOT,
        env=_env(None),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        for line in proc.stdout:  # bounded by the demo's own timeout and the test timeout
            lines.append(line)
            found = _SERVING.search(line)
            if found:
                break
        else:
            raise AssertionError("no dashboard URL: " + "".join(lines) + proc.communicate()[1])
        assert any("ok   poison dead-lettered" in line for line in lines), lines
        status, page = _get(found.group(1) + "sessions?q=demo-")
        assert status == 200
        assert page.count('<a href="/session?id=demo-') == 4
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
