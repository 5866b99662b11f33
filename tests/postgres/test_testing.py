"""The a2pg.testing plugin: private servers that crash and come back, names, and the CI rule."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from a2pg.testing import EmbeddedPostgres, dsn_for_database, redact, unique_name

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.postgres
def test_a_private_server_survives_kill_and_restart(private_postgres: EmbeddedPostgres) -> None:
    dsn = private_postgres.dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table kept (x int)")
        conn.execute("insert into kept values (1)")
    private_postgres.kill()
    assert not private_postgres.running
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=2)
    private_postgres.start()
    private_postgres.restart()
    private_postgres.stop(mode="immediate")
    private_postgres.start()
    with psycopg.connect(dsn) as conn:
        assert conn.execute("select x from kept").fetchall() == [(1,)]


def test_unique_names_differ_and_fit_postgres() -> None:
    names = {unique_name("a2pg_test") for _ in range(100)}
    assert len(names) == 100
    assert all(len(name) <= 63 for name in names)


def test_dsn_helpers_keep_the_server_and_hide_the_password() -> None:
    url = "postgresql://u:secret@h:5433/one?sslmode=disable"
    assert dsn_for_database(url, "two") == "postgresql://u:secret@h:5433/two?sslmode=disable"
    assert "dbname=two" in dsn_for_database("host=h dbname=one", "two")
    assert redact(url) == "postgresql://u:***@h:5433/one?sslmode=disable"
    assert "secret" not in redact("host=h password=secret")


def test_in_ci_a_skipped_postgres_test_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "test_skip.py").write_text(
        "import pytest\n"
        "@pytest.mark.postgres\n"
        "def test_skipped():\n"
        "    pytest.skip('no server')\n"
        "def test_other_skip():\n"
        "    pytest.skip('fine')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-c", os.devnull,
         "--rootdir", str(tmp_path), "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "CI": "true", "A2PG_TEST_DSN": "postgresql://nobody@127.0.0.1:1/none"},
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    assert "1 failed, 1 skipped" in done.stdout
    assert "a2pg: 0 PostgreSQL tests ran, 1 skipped" in done.stdout
