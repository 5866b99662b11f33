"""``a2pg bench --citus`` without a cluster: its options, the CPU reading, the report's
arithmetic and its table (the run itself is in ``tests/citus/test_bench.py``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from a2pg.bench.citus import PLAIN, CitusConfig, Setup, _figures
from a2pg.bench.server_cpu import server_cpu
from a2pg.cli.bench_citus import print_table
from a2pg.cli.common import EXIT_USAGE

from .conftest import Cli


def test_citus_options_without_citus_are_refused(cli: Cli) -> None:
    result = cli("bench", "--citus-heads", "10", "--citus-rounds", "1")
    assert result.code == EXIT_USAGE
    assert "--citus-rounds, --citus-heads: only with --citus" in result.err


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (("--dsn", "postgresql://nobody@127.0.0.1:1/none"), "not --dsn"),
        (("--versus", "pgqueuer"), "not --versus"),
    ],
)
def test_citus_starts_its_own_servers(cli: Cli, extra: tuple[str, ...], said: str) -> None:
    result = cli("bench", "--citus", *extra)
    assert result.code == EXIT_USAGE
    assert f"--citus starts its own servers (it reads their CPU): {said}" in result.err


@pytest.mark.parametrize("nodes", ["0", "1,x", "", "17", " , "])
def test_bad_node_counts_are_refused_before_anything_starts(cli: Cli, nodes: str) -> None:
    result = cli("bench", "--citus", "--citus-nodes", nodes)
    assert result.code == EXIT_USAGE
    assert "citus_nodes must be node counts from 1 to 16" in result.err


def test_node_counts_are_sorted_and_distinct() -> None:
    assert CitusConfig(citus_nodes="4, 1,2,1").node_counts == (1, 2, 4)
    with pytest.raises(ValueError, match="citus_heads must be a positive int"):
        CitusConfig(citus_heads=0)


def test_a_servers_cpu_counts_the_children_it_reaped() -> None:
    """A backend that exited is counted by its postmaster's cutime: a reading that missed
    it would undercount every drain whose connections closed before the end."""
    before = server_cpu(os.getpid())
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)  # a child, run and reaped
    assert server_cpu(os.getpid()) - before >= 0.25


def test_a_server_that_is_gone_is_said_so() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(RuntimeError, match=f"no process {child.pid}"):
        server_cpu(child.pid)


def _setup(name: str, nodes: int, cpu: list[dict[str, float]], rates: list[float]) -> Setup:
    servers = dict.fromkeys(cpu[0], None)
    setup = Setup(name, nodes, "postgresql://", servers, "s")  # type: ignore[arg-type]
    setup.cpu, setup.rates = cpu, rates
    setup.client = [0.5] * len(rates)
    setup.shares = [{n: 1 / nodes for n in servers if n.startswith("node")}] * len(rates)
    return setup


def test_price_balance_and_projection() -> None:
    plain = _setup(PLAIN, 0, [{"server": 1.0}, {"server": 2.0}], [900.0, 1000.0])
    cluster = _setup(
        "Citus, 2 nodes",
        2,
        [
            {"coordinator": 1.0, "node 1": 2.0, "node 2": 1.0},  # 4.0: 4x one PostgreSQL
            {"coordinator": 2.0, "node 1": 2.0, "node 2": 2.0},  # 6.0: 3x
        ],
        [300.0, 500.0],
    )
    figures = _figures(cluster, plain)
    assert figures["heads_per_s"] == {"median": 400.0, "min": 300.0, "max": 500.0}
    assert figures["server_cpu_ms_per_head"] == {"median": 5.0, "min": 4.0, "max": 6.0}
    assert figures["price_x_one_postgresql"] == {"median": 3.5, "min": 3.0, "max": 4.0}
    assert figures["cpu_ms_per_head"] == {"coordinator": 1.5, "node 1": 2.0, "node 2": 1.5}
    assert figures["node_cpu_balance"] == pytest.approx(2.0 / 1.5)
    assert figures["projected_heads_per_s"] == pytest.approx(500.0)  # node 1: 2 ms per head
    assert figures["heads_share"] == {"node 1": 0.5, "node 2": 0.5}
    assert _figures(plain, plain)["node_cpu_balance"] is None


def test_the_table_labels_the_projection_and_the_shared_cores() -> None:
    plain = _setup(PLAIN, 0, [{"server": 1.0}], [900.0])
    cluster = _setup("Citus, 1 node", 1, [{"coordinator": 1.0, "node 1": 3.0}], [200.0])
    data = {
        "machine": {"cpu_cores": 2, "postgres": "18.6", "citus": "14.0-1", "python": "3.12",
                    "loop": "asyncio", "date": "2026-12-03", "synchronous_commit": "off"},
        "config": {"citus_rounds": 1, "citus_heads": 100, "sessions": 256, "workers": 4,
                   "worker_concurrency": 10, "shards": 8},
        "ok": False,
        "setups": [_figures(plain, plain), _figures(cluster, plain)],
        "checks": [{"name": "round 1: every head done once", "ok": False, "detail": "99 of 100"}],
    }  # fmt: skip
    stdout = io.StringIO()
    print_table(stdout, data)
    text = stdout.getvalue()
    assert "Citus, 1 node" in text and "4.00x" in text  # price: 4 ms against 1 ms
    assert "3.00 ms (heads 100%)" in text
    assert "PROJECTION, not a measurement" in text
    assert "2 shared cores cannot show throughput scaling" in text
    assert "FAIL round 1: every head done once: 99 of 100" in text


@pytest.mark.parametrize(
    ("extra", "said"),
    [(("--dsn", "postgresql://nobody@127.0.0.1:1/none"), "--dsn"), (("--sqlite",), "--sqlite")],
)
def test_demo_citus_starts_a_cluster_of_its_own(
    cli: Cli, extra: tuple[str, ...], said: str
) -> None:
    result = cli("demo", "--citus", *extra)
    assert result.code == EXIT_USAGE
    assert f"--citus starts a cluster of its own: not with {said}" in result.err
