"""The Docker example (``docker/``): its compose file's promises, and its roles and grants
run for real.

No Docker engine is needed: the compose file is read as YAML and checked for what
docs/operating/docker.md promises (one image for the migration and the workers, a
restart policy, a runtime role that is not the superuser, health checks, the extras
and a stop grace above the measured shutdown); then its SQL runs on the test server
exactly as the postgres container would run it, ``a2pg migrate`` and ``a2pg grants
--apply`` run as the owner role with the migrate and grant services' settings, and a
real ``a2pg worker`` process (scraped the way its health check scrapes it) and an
inspection command run as the runtime role with the worker service's settings.
"""

from __future__ import annotations

import asyncio
import http.server
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest
import yaml
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from a2pg.models import NewEvent, Target
from a2pg.postgres import PostgresStore
from a2pg.postgres.layout import TABLES, VERSION_TABLE
from a2pg.testing import scratch_database, unique_name

from .conftest import A2PG

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yml"
ROLES_SQL = DOCKER / "initdb" / "10-roles.sql"
HEALTHCHECK = DOCKER / "healthcheck.py"
OWNER, RUNTIME = "a2pg_owner", "a2pg_worker"
TIMEOUT = 60.0
EVENTS = 5
MEASURED_SHUTDOWN = 38.8
"""Seconds a worker took to stop after SIGTERM under load (default --shutdown-grace 30)."""


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def service_env(name: str) -> dict[str, str]:
    env: dict[str, str] = compose()["services"][name]["environment"]
    return env


def test_one_image_built_once_runs_the_jobs_the_workers_and_the_dashboard() -> None:
    services = compose()["services"]
    migrate = services["migrate"]
    built = [name for name, service in services.items() if "build" in service]
    assert built == ["migrate"]
    assert migrate["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
    for name in ("grant", "worker", "dashboard"):
        assert services[name]["image"] == migrate["image"], name
        assert services[name]["pull_policy"] == "never", name  # never looked for in a registry
    assert services["grant"]["command"] == ["grants", RUNTIME, "--apply"]
    assert services["grant"]["depends_on"] == {
        "migrate": {"condition": "service_completed_successfully"}
    }
    for name in ("worker", "dashboard"):
        assert services[name]["depends_on"] == {
            "grant": {"condition": "service_completed_successfully"}
        }


def seconds(text: str) -> float:
    """A compose duration such as ``60s`` or ``1m30s``, in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
    assert "".join(f"{n}{u}" for n, u in parts) == text, text
    return sum(float(n) * units[u] for n, u in parts)


def test_workers_restart_and_stop_gracefully() -> None:
    worker = compose()["services"]["worker"]
    assert worker["restart"] in ("unless-stopped", "always", "on-failure")
    assert worker["stop_signal"] == "SIGTERM"
    assert worker["command"][0] == "worker"
    # Comfortably above the shutdown measured under load, not just above --shutdown-grace.
    assert seconds(worker["stop_grace_period"]) >= 1.5 * MEASURED_SHUTDOWN


def test_the_image_has_the_extras_and_a_health_check() -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    assert "pip install '.[metrics,dashboard]'" in dockerfile
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {"metrics", "dashboard"} <= set(extras["optional-dependencies"])
    assert re.search(r"^HEALTHCHECK .*\\\n\s+CMD \[\"a2pg-healthcheck\"\]$", dockerfile, re.M)
    assert "COPY docker/healthcheck.py /usr/local/bin/a2pg-healthcheck" in dockerfile


def test_the_workers_and_the_dashboard_have_health_checks() -> None:
    services = compose()["services"]
    worker, dashboard = services["worker"], services["dashboard"]
    assert "--metrics-port=9464" in worker["command"]
    assert "--metrics-host=0.0.0.0" in worker["command"]
    assert worker["healthcheck"]["test"] == [
        "CMD", "a2pg-healthcheck", "http://127.0.0.1:9464/metrics"
    ]  # fmt: skip
    assert dashboard["command"] == ["dashboard", "--host=0.0.0.0", "--port=8080"]
    assert dashboard["ports"] == ["127.0.0.1:8080:8080"]
    assert dashboard["healthcheck"]["test"] == ["CMD", "a2pg-healthcheck", "http://127.0.0.1:8080/"]
    assert dashboard["environment"]["A2PG_DASHBOARD_BASIC"].count(":") == 1  # auth on
    for name in ("migrate", "grant"):  # one-shot jobs
        assert services[name]["healthcheck"] == {"disable": True}, name


def test_the_migration_runs_as_the_owner_and_the_workers_as_the_runtime_role() -> None:
    migrate = conninfo_to_dict(service_env("migrate")["A2PG_DSN"])
    worker = conninfo_to_dict(service_env("worker")["A2PG_DSN"])
    assert (migrate["user"], worker["user"]) == (OWNER, RUNTIME)
    assert service_env("migrate")["A2PG_SCHEMA"] == service_env("worker")["A2PG_SCHEMA"] == "a2"
    created = [line for line in ROLES_SQL.read_text().splitlines() if "create role" in line]
    assert [line.split()[2:4] for line in created] == [[OWNER, "login"], [RUNTIME, "login"]]
    mounts = compose()["services"]["postgres"]["volumes"]
    assert "./initdb:/docker-entrypoint-initdb.d:ro" in mounts


def test_the_build_context_sends_only_what_the_image_installs() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ignored[ignored.index("*") :][:1] == ["*"]
    copied = {
        part.rstrip("/")
        for line in (DOCKER / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ")
        for part in line.split()[1:-1]
    }
    # Each copied path is let through, as a folder (`!a2pg/`) or a file.
    assert all({f"!{name}", f"!{name}/"} & set(ignored) for name in copied), (copied, ignored)


def test_inspection_commands_are_documented() -> None:
    text = COMPOSE.read_text()
    assert "docker compose -f docker/compose.yml run --rm --no-deps worker sessions" in text


# --- The roles and grants, for real ------------------------------------------------------


def with_roles(text: str, owner: str, runtime: str) -> str:
    """The SQL with this test's role names (roles are server-wide; tests run in parallel)."""
    return text.replace(OWNER, owner).replace(RUNTIME, runtime)


def as_service(name: str, database: str, owner: str, runtime: str) -> dict[str, str]:
    """The compose service's environment, its DSN pointed at ``database`` and this test's
    roles (user and password as compose gives them)."""
    env = dict(service_env(name))
    given = conninfo_to_dict(env["A2PG_DSN"])
    target = conninfo_to_dict(database)
    user = {OWNER: owner, RUNTIME: runtime}[str(given["user"])]
    env["A2PG_DSN"] = make_conninfo(
        database, user=user, password=str(given["password"]), dbname=target["dbname"]
    )
    return env


def run_a2pg(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("A2PG_")}
    return subprocess.run(
        [str(A2PG), *argv],
        env={**base, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.fixture
def roles(postgres_server_dsn: str) -> Iterator[tuple[str, str]]:
    owner, runtime = unique_name("a2pg_owner"), unique_name("a2pg_worker")
    try:
        yield owner, runtime
    finally:
        with psycopg.connect(postgres_server_dsn, autocommit=True) as conn:
            for role in (runtime, owner):
                conn.execute(
                    "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s",
                    (role,),
                )
                conn.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role)))


def grants(dsn: str, role: str) -> dict[str, set[str]]:
    """What ``role`` may do on each table of schema a2."""
    found: dict[str, set[str]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for (table,) in conn.execute("select tablename from pg_tables where schemaname = 'a2'"):
            found[table] = {
                right
                for right in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES")
                if conn.execute(
                    "select has_table_privilege(%s, format('a2.%%I', %s::text), %s)",
                    (role, table, right),
                ).fetchone()
                == (True,)
            }
    return found


async def append_work(dsn: str) -> None:
    store = await PostgresStore.open(dsn, schema="a2")
    try:
        for n in range(EVENTS):
            await store.append("docker", [NewEvent("ping", n, targets=[Target("echo")])])
    finally:
        await store.close()


def echoes(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select count(*) from a2.a2_events where event_type = 'echoed'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_roles_migrate_grant_and_work_with_least_privilege(
    postgres_server_dsn: str, roles: tuple[str, str]
) -> None:
    owner, runtime = roles
    with scratch_database(postgres_server_dsn, "a2pg_docker") as database:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(with_roles(ROLES_SQL.read_text(), owner, runtime))  # as initdb does
        migrate_env = as_service("migrate", database, owner, runtime)
        grant_env = as_service("grant", database, owner, runtime)
        worker_env = as_service("worker", database, owner, runtime)
        grant_command = [
            runtime if part == RUNTIME else part
            for part in compose()["services"]["grant"]["command"]
        ]

        # The runtime role cannot migrate (told which rights it lacks); the owner can,
        # twice (a redeploy), and grants with the grant service's command each time.
        refused = run_a2pg("migrate", env=worker_env)
        assert refused.returncode == 1, refused
        assert "a2pg grants ROLE --schema a2" in refused.stderr
        for _ in range(2):
            migrated = run_a2pg("migrate", env=migrate_env)
            assert migrated.returncode == 0, migrated
            granted = run_a2pg(*grant_command, env=grant_env)
            assert granted.returncode == 0, granted

        rights = {"SELECT", "INSERT", "UPDATE", "DELETE"}
        expected = {name: rights for name in TABLES} | {"a2_meta": {"SELECT"}, VERSION_TABLE: set()}
        assert grants(database, runtime) == expected
        with psycopg.connect(database, autocommit=True) as conn:
            creatable = conn.execute(
                "select nspname from pg_namespace where has_schema_privilege(%s, oid, 'CREATE')"
                " union all select 'database' where has_database_privilege(%s,"
                " current_database(), 'CREATE') or has_database_privilege(%s,"
                " current_database(), 'TEMPORARY')",
                (runtime, runtime, runtime),
            ).fetchall()
            super_ = conn.execute(
                "select rolsuper or rolcreaterole or rolcreatedb from pg_roles where rolname = %s",
                (runtime,),
            ).fetchone()
        assert creatable == []
        assert super_ == (False,)

        asyncio.run(append_work(migrate_env["A2PG_DSN"]))
        metrics_port = free_port()
        health = [sys.executable, str(HEALTHCHECK), f"http://127.0.0.1:{metrics_port}/metrics"]
        worker = subprocess.Popen(
            [str(A2PG), "worker", "tests.cli.sample_app:app", "--poll-interval", "0.2",
             f"--metrics-port={metrics_port}"],
            env={**{k: v for k, v in os.environ.items() if not k.startswith("A2PG_")},
                 **worker_env},
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + TIMEOUT
            while echoes(database) < EVENTS:
                assert worker.poll() is None, worker.communicate()
                assert time.monotonic() < deadline, "the worker did not process the events"
                time.sleep(0.1)
            # The worker service's health check, against the real worker.
            while subprocess.run(health, capture_output=True, check=False).returncode != 0:
                assert worker.poll() is None, worker.communicate()
                assert time.monotonic() < deadline, "the worker's health check never passed"
                time.sleep(0.1)
            sessions = run_a2pg("sessions", env=worker_env)  # inspection, as the runtime role
            assert sessions.returncode == 0, sessions
            assert "docker" in sessions.stdout
            worker.send_signal(signal.SIGTERM)
            _out, err = worker.communicate(timeout=TIMEOUT)
            assert worker.returncode == 0, err
            assert "permission denied" not in err
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        with psycopg.connect(database, autocommit=True) as conn:
            for role in (runtime, owner):
                conn.execute(sql.SQL("drop owned by {}").format(sql.Identifier(role)))


# --- The health check script ----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Answer(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the status its path names (``/401``), or 200; records
    the Authorization header it was sent."""

    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        _Answer.seen.append(self.headers.get("Authorization"))
        status = int(self.path.strip("/") or 200)
        self.send_response(status)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[str]:
    """The base URL of a local HTTP server of this test's own."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Answer.seen.clear()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def healthcheck(*argv: str, env: dict[str, str] | None = None) -> int:
    return run_healthcheck(*argv, env=env).returncode


def run_healthcheck(
    *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The script as the image runs it, with ``a2pg`` on its PATH."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("A2PG_")}
    base["PATH"] = f"{A2PG.parent}{os.pathsep}{base.get('PATH', '')}"
    return subprocess.run(
        [sys.executable, str(HEALTHCHECK), *argv],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_the_health_check_passes_on_2xx_and_fails_on_anything_else(answering: str) -> None:
    assert healthcheck(f"{answering}/") == 0
    assert healthcheck(f"{answering}/204") == 0
    assert healthcheck(f"{answering}/401") == 1
    assert healthcheck(f"{answering}/503") == 1
    assert healthcheck(f"http://127.0.0.1:{free_port()}/metrics") == 1  # nothing listens
    assert healthcheck(env={"A2PG_HEALTH_URL": f"{answering}/"}) == 0


def test_the_health_check_sends_the_dashboards_credentials(answering: str) -> None:
    assert healthcheck(f"{answering}/", env={"A2PG_DASHBOARD_TOKEN": "t0ken"}) == 0
    assert healthcheck(f"{answering}/", env={"A2PG_DASHBOARD_BASIC": "admin:pw"}) == 0
    assert healthcheck(f"{answering}/") == 0
    assert _Answer.seen == ["Bearer t0ken", "Basic YWRtaW46cHc=", None]


def test_without_a_url_the_health_check_is_a2pg_check() -> None:
    """``a2pg check`` with no database exits 2: unhealthy, as 1 (Docker reserves 2)."""
    done = run_healthcheck()
    assert done.returncode == 1
    assert "a2pg: error: no database given" in done.stderr
