"""``a2pg bench --versus pgqueuer``: the report's arithmetic, its options, the missing extra,
``--sync off``, and one tiny run end to end (its figures mean nothing: none is asserted)."""

from __future__ import annotations

import io
import json
import math
import os
import statistics
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from a2pg.bench.phases import Check
from a2pg.bench.sync import synchronous_commit
from a2pg.bench.versus_config import VersusConfig
from a2pg.bench.versus_phases import Tally
from a2pg.bench.versus_stats import Figures, ratio
from a2pg.cli.bench_versus import VERSUS_MISSING, print_table, row
from a2pg.cli.common import EXIT_USAGE

from .conftest import Cli

FIGURES = ("append_single", "append_batch", "drain", "mixed", "wake_p50", "wake_p99")
TARGETS = {
    "append_single": ">= 1.0x",
    "append_batch": ">= 1.0x",
    "drain": ">= 1.5x",
    "mixed": ">= 1.0x",
    "wake_p50": "<= 1.0x",
    "wake_p99": "<= 1.0x",
}
PHASES = ("append_single", "append_batch", "drain", "mixed", "wake")
TINY = {
    "rounds": "2",
    "vs-events": "200",
    "vs-appends": "20",
    "vs-batches": "3",
    "mixed-seconds": "1",
    "wake-samples": "10",
}
"""Sizes that take seconds."""


# ------------------------------------------------------------------ arithmetic, no database


def test_the_ratio_is_the_median_of_same_round_ratios() -> None:
    figures = Figures("pgqueuer")
    for a2pg, other in ((100.0, 50.0), (200.0, 400.0), (600.0, 300.0)):
        figures.add("drain", "a2pg", a2pg)
        figures.add("drain", "pgqueuer", other)
    data = figures.as_json()["drain"]
    assert data["a2pg"] == {
        "runs": [100.0, 200.0, 600.0],
        "median": 200.0,
        "min": 100.0,
        "max": 600.0,
    }
    assert data["pgqueuer"]["median"] == 300.0
    ratios = data["ratio"]
    assert ratios["runs"] == [2.0, 0.5, 2.0]
    assert (ratios["median"], ratios["min"], ratios["max"]) == (2.0, 0.5, 2.0)
    assert math.isclose(ratios["of_medians"], 200.0 / 300.0)  # beside it, not instead
    assert data["target"]["text"] == ">= 1.5x"
    assert data["target"]["met"] is True  # judged on the median same-round ratio


def test_latency_targets_are_met_at_or_below_the_others() -> None:
    figures = Figures("pgqueuer")
    figures.add("wake_p50", "a2pg", 3.0)
    figures.add("wake_p50", "pgqueuer", 3.0)
    figures.add("wake_p99", "a2pg", 9.0)
    figures.add("wake_p99", "pgqueuer", 6.0)
    data = figures.as_json()
    assert data["wake_p50"]["better"] == "lower"
    assert (data["wake_p50"]["ratio"]["median"], data["wake_p50"]["target"]["met"]) == (1.0, True)
    assert (data["wake_p99"]["ratio"]["median"], data["wake_p99"]["target"]["met"]) == (1.5, False)
    assert data["append_single"]["target"]["met"] is None  # not measured
    assert {key: f["target"]["text"] for key, f in data.items()} == TARGETS


def test_no_ratio_without_both_values() -> None:
    assert ratio(5.0, 0.0) is None
    assert ratio(None, 2.0) is None
    assert ratio(3.0, 2.0) == 1.5


def test_a_table_row_shows_both_systems_the_ratio_and_the_verdict() -> None:
    figures = Figures("pgqueuer")
    for a2pg, other in ((1_500.0, 1_000.0), (2_000.0, 1_000.0)):
        figures.add("append_batch", "a2pg", a2pg)
        figures.add("append_batch", "pgqueuer", other)
    figures.add("wake_p50", "a2pg", 1.234)
    figures.add("wake_p50", "pgqueuer", 2.468)
    data = figures.as_json()
    assert row(data["append_batch"], "pgqueuer") == {
        "figure": "append, batches of 100 (4 producers)",
        "a2pg": "1,750 jobs/s (1,500-2,000)",
        "pgqueuer": "1,000 jobs/s (1,000-1,000)",
        "a2pg/pgqueuer": "1.75x (1.50-2.00)",
        "target": ">= 1.0x",
        "met": "yes",
    }
    assert row(data["wake_p50"], "pgqueuer")["a2pg"] == "1.23 ms (1.23-1.23)"
    assert row(data["wake_p50"], "pgqueuer")["a2pg/pgqueuer"] == "0.50x (0.50-0.50)"


def _report(checks: list[Check]) -> dict[str, Any]:
    figures = Figures("pgqueuer")
    for key in FIGURES:
        figures.add(key, "a2pg", 2.0)
        figures.add(key, "pgqueuer", 1.0)
    data = figures.as_json()
    machine = {"cpu_cores": 2, "postgres": "15.2", "fsync": "on", "synchronous_commit": "off"}
    machine |= {"synchronous_commit_asyncpg": "off", "python": "3.11.7", "date": "2026-12-01"}
    machine |= {"loop": "uvloop 0.23.0", "a2pg": "0.1.0", "psycopg": "3.3", "pgqueuer": "1.6.0"}
    machine |= {"asyncpg": "0.32.0", "load_average_start": [0.5], "load_average_rounds": [[0.7]]}
    return {
        "versus": "pgqueuer",
        "database": "a test",
        "machine": machine,
        "config": {"rounds": 1, "sync": "off"},
        "ok": all(check.ok for check in checks),
        "figures": data,
        "targets": [{"figure": k, "name": f["name"], **f["target"]} for k, f in data.items()],
        "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks],
    }


def test_the_table_names_the_loop_the_setting_and_failed_checks() -> None:
    table = io.StringIO()
    print_table(table, _report([Check("round 1 pgqueuer drain: done once", False, "9 of 10")]))
    lines = table.getvalue().splitlines()
    assert "synchronous_commit off (--sync off; asyncpg's connections: off)" in lines[1]
    assert lines[2].startswith("event loop: uvloop 0.23.0, the same for both")
    header = next(line for line in lines if line.startswith("FIGURE"))
    assert header.split() == ["FIGURE", "A2PG", "PGQUEUER", "A2PG/PGQUEUER", "TARGET", "MET"]
    assert "targets met: 4 of 6" in lines  # the wake latencies are 2x: not met
    assert lines[-1] == "FAIL round 1 pgqueuer drain: done once: 9 of 10"


def test_the_tally_sees_every_job_once() -> None:
    tally = Tally()
    for n in (0, 1, 2):
        tally.record(n)
    assert tally.exactly_once(3)
    assert not tally.exactly_once(4)
    tally.record(1)
    assert (tally.calls, tally.duplicates, tally.exactly_once(3)) == (4, 1, False)


@pytest.mark.parametrize("knobs", [{"rounds": 0}, {"mixed_seconds": 0.0}, {"vs_events": True}])
def test_bad_knobs_are_refused(knobs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(knobs))):
        VersusConfig(**knobs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "2"], "--rounds: only with --versus"),
        (["--versus", "pgqueuer", "--sqlite"], "--versus runs on PostgreSQL"),
        (["--sync", "off", "--sqlite"], "--sync off applies to PostgreSQL"),
        (["--versus", "pgqueuer", "--rounds", "0"], "--rounds: must be at least 1"),
    ],
)
def test_misplaced_options_are_usage_errors(cli: Cli, argv: list[str], message: str) -> None:
    result = cli("bench", *argv)
    assert result.code == EXIT_USAGE, result
    assert message in result.err


def test_versus_accepts_only_known_systems(cli: Cli) -> None:
    result = cli("bench", "--versus", "celery")
    assert result.code == EXIT_USAGE
    assert "invalid choice: 'celery'" in result.err


# ------------------------------------------------------------------ without the extra

WITHOUT = (
    "import sys\n"
    "sys.modules[sys.argv.pop(1)] = None\n"
    "from a2pg.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@pytest.mark.parametrize("module", ["pgqueuer", "asyncpg"])
def test_without_the_extra_versus_prints_one_line_naming_it(module: str) -> None:
    """As ``test_extras`` does for ``[embedded]``: ``sys.modules[name] = None`` makes every
    import of it fail, as an environment without the wheel would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2PG_")}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT, module, "bench", "--versus", "pgqueuer", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == EXIT_USAGE, done
    assert done.stdout == ""
    assert done.stderr == f"a2pg: error: {VERSUS_MISSING}\n"
    assert "pip install 'a2pg[bench]'" in done.stderr


# ------------------------------------------------------------------ on PostgreSQL


def _database_settings(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select s.setconfig from pg_db_role_setting s join pg_database d"
            " on d.oid = s.setdatabase where d.datname = current_database() and s.setrole = 0"
        ).fetchone()
    return list(row[0]) if row and row[0] else []


def _show(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("show synchronous_commit").fetchone()
    return str(row[0]) if row else ""


def _versus_schemas(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            r"select nspname from pg_namespace"
            r" where nspname like 'a2pg\_vs\_%' or nspname like 'pgqueuer\_vs\_%'"
        ).fetchall()
    return [str(r[0]) for r in rows]


@pytest.mark.postgres
async def test_sync_off_holds_for_new_connections_and_puts_back_what_was_there(
    postgres_dsn: str,
) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        name = conn.execute("select current_database()").fetchone()
        assert name is not None
        conn.execute(f'alter database "{name[0]}" set synchronous_commit = local')
    try:
        async with synchronous_commit(postgres_dsn, "off"):
            assert _show(postgres_dsn) == "off"
        assert _database_settings(postgres_dsn) == ["synchronous_commit=local"]
        async with synchronous_commit(postgres_dsn, "on"):  # on: nothing is touched
            assert _show(postgres_dsn) == "local"
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f'alter database "{name[0]}" reset synchronous_commit')
    assert _database_settings(postgres_dsn) == []


@pytest.mark.postgres
def test_versus_json_with_tiny_sizes(cli: Cli, postgres_dsn: str) -> None:
    options = [part for name, value in TINY.items() for part in (f"--{name}", value)]
    result = cli(
        "bench", "--versus", "pgqueuer", "--sync", "off", "--json", "--dsn", postgres_dsn, *options
    )
    assert result.code == 0, result.out + result.err
    data = json.loads(result.out)
    assert data["ok"] is True
    assert data["versus"] == "pgqueuer"
    machine = data["machine"]
    assert machine["synchronous_commit"] == "off"  # in effect during the run...
    assert machine["synchronous_commit_asyncpg"] == "off"
    assert _database_settings(postgres_dsn) == []  # ...and reset afterwards
    assert _versus_schemas(postgres_dsn) == []  # both schemas dropped
    assert set(machine) >= {"cpu_cores", "postgres", "python", "loop", "pgqueuer", "date"}
    assert set(machine) >= {"load_average_start", "load_average_rounds", "load_average_end"}
    assert machine["loop"].startswith("uvloop ")
    assert data["config"]["rounds"] == 2
    assert data["config"]["sync"] == "off"
    assert tuple(data["figures"]) == FIGURES
    for key, figure in data["figures"].items():
        for system in ("a2pg", "pgqueuer"):
            runs = figure[system]["runs"]
            assert len(runs) == 2 and all(isinstance(v, float) and v >= 0 for v in runs), key
            assert figure[system]["median"] == statistics.median(runs), key
        expected = [
            a / b for a, b in zip(figure["a2pg"]["runs"], figure["pgqueuer"]["runs"], strict=True)
        ]
        assert figure["ratio"]["runs"] == pytest.approx(expected), key
        assert figure["ratio"]["median"] == pytest.approx(statistics.median(expected)), key
        medians = figure["a2pg"]["median"] / figure["pgqueuer"]["median"]
        assert figure["ratio"]["of_medians"] == pytest.approx(medians), key
        assert figure["target"]["text"] == TARGETS[key]
        assert isinstance(figure["target"]["met"], bool), key
    checks = {check["name"]: check for check in data["checks"]}
    assert all(check["ok"] for check in checks.values())
    for number in (1, 2):
        for system in ("a2pg", "pgqueuer"):
            label = f"round {number} {system}"
            assert checks[f"{label} drain: the handlers ran each job once"]["detail"] == (
                "200 calls for 200 of 200 jobs"
            )
            done = checks[f"{label} drain: every job recorded done once, none left"]["detail"]
            assert done == "200 done (200 distinct) of 200, 0 left"
            assert checks[f"{label} append_batch: every job stored"]["detail"] == "300 of 300"
            assert checks[f"{label} wake: the handlers ran each job once"]["detail"] == (
                "11 calls for 11 of 11 jobs"  # a warm-up job, then the 10 samples
            )
            assert f"{label} mixed: every job recorded done once, none left" in checks
    assert len(checks) == 2 * 2 * (2 * len(PHASES) - 2)  # appends have one check each
    table = io.StringIO()
    print_table(table, {**data, "database": "the test database"})
    assert "A2PG/PGQUEUER" in table.getvalue()
