"""``a2pg bench --citus`` end to end at tiny sizes: a cluster of its own beside one
PostgreSQL, every head done once, every server's CPU read (its figures mean nothing
here: none is asserted beyond its shape)."""

from __future__ import annotations

import json

import pytest

from a2pg.bench.citus import COORDINATOR, PLAIN, SERVER

from .conftest import Cli

pytestmark = [pytest.mark.citus, pytest.mark.postgres]


def test_bench_citus_json_with_tiny_sizes(cli: Cli) -> None:
    result = cli("bench", "--citus", "--citus-rounds", "1", "--citus-heads", "120",
                 "--citus-nodes", "2", "--json")  # fmt: skip
    assert result.code == 0, result.out + result.err
    data = json.loads(result.out)
    assert data["ok"] is True
    assert data["machine"]["synchronous_commit"] == "off"
    assert data["machine"]["citus"].startswith("14.")
    plain, cluster = data["setups"]
    assert (plain["setup"], cluster["setup"]) == (PLAIN, "Citus, 2 nodes")
    assert set(plain["cpu_ms_per_head"]) == {SERVER}
    assert set(cluster["cpu_ms_per_head"]) == {COORDINATOR, "node 1", "node 2"}
    # Every server worked: a node whose CPU read zero was not measured (or not used).
    assert all(ms > 0 for ms in cluster["cpu_ms_per_head"].values()), cluster
    assert sum(cluster["heads_share"].values()) == pytest.approx(1.0)
    assert all(share > 0 for share in cluster["heads_share"].values())  # 8 shards on 2 nodes
    assert plain["price_x_one_postgresql"]["median"] == 1.0
    assert cluster["projected_heads_per_s"] > 0
    names = [check["name"] for check in data["checks"]]
    assert len(names) == 4 and all(check["ok"] for check in data["checks"])  # 2 per drain
    assert "round 1 Citus, 2 nodes: every job recorded done once, none left" in names
