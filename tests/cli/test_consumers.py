"""``a2pg consumers``: the registry with each consumer's work, and ``--unregister``."""

from __future__ import annotations

import json

import pytest

from a2pg.models import Consumer, LogSpec
from a2pg.postgres import PostgresStore

from .conftest import Cli
from .test_retention import with_store

AUDIT = Consumer("audit", LogSpec(lane="log", types=("order.placed", "order.paid")))
ARCHIVE = Consumer("archive", LogSpec(lane="all"))


def registered(dsn: str) -> list[str]:
    consumers = with_store(dsn, lambda store: store.registered_consumers())
    return sorted(c.name for c in consumers)


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    async def register(store: PostgresStore) -> None:
        await store.register_consumers([AUDIT, ARCHIVE])

    with_store(postgres_dsn, register)
    return postgres_dsn


def test_unregister(cli: Cli, dsn: str) -> None:
    result = cli("consumers", "--unregister", "audit", "--dsn", dsn)
    assert result.code == 0, result
    assert result.out == "unregistered: audit\n"
    assert registered(dsn) == ["archive"]


def test_unregister_several_json(cli: Cli, dsn: str) -> None:
    argv = ["--unregister", "archive", "--unregister", "audit", "--unregister", "archive"]
    result = cli("consumers", *argv, "--json", "--dsn", dsn)
    assert result.code == 0, result
    assert json.loads(result.out) == {"unregistered": ["archive", "audit"]}
    assert registered(dsn) == []


def test_unregister_an_unknown_name_exits_5_and_unregisters_nothing(cli: Cli, dsn: str) -> None:
    result = cli("consumers", "--unregister", "audit", "--unregister", "nope", "--dsn", dsn)
    assert result.code == 5
    assert result.out == ""
    assert result.err == "a2pg: error: not registered: 'nope' (nothing unregistered)\n"
    assert registered(dsn) == ["archive", "audit"]


def test_unregister_a_bad_name_exits_2(cli: Cli, dsn: str) -> None:
    result = cli("consumers", "--unregister", "", "--dsn", dsn)
    assert result.code == 2
    assert result.err.startswith("a2pg: error: ")
    assert result.err.count("\n") == 1
    assert registered(dsn) == ["archive", "audit"]
