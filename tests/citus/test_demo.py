"""``a2pg demo --citus``: the demo's workload and verification on a throwaway cluster of
the embedded wheel (a coordinator and 2 worker nodes), its workers separate processes."""

from __future__ import annotations

import json

import pytest

from .conftest import Cli

pytestmark = [pytest.mark.citus, pytest.mark.postgres]


def test_the_demo_runs_and_verifies_on_a_citus_cluster(cli: Cli) -> None:
    result = cli("demo", "--citus", "--sessions", "4", "--json")
    assert result.code == 0, result.out + result.err
    data = json.loads(result.out)
    assert data["ok"] is True, data["checks"]
    assert data["database"].startswith("embedded Citus PostgreSQL 18")
    assert {check["name"] for check in data["checks"]} >= {"exactly once", "order"}
