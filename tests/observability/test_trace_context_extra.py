"""The trace context of appends needs no OpenTelemetry: without it installed (its import
blocked, as ``tests/cli/test_extras.py`` does) an append works and stores None, a carried
context is stored all the same, and with it installed but unused the store never imports it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = """\
import asyncio, json, sys, tempfile
if sys.argv[1] == "blocked":
    sys.modules["opentelemetry"] = None  # importing it now raises ImportError
from pathlib import Path
from a2pg import NewEvent
from a2pg.contract.propagation import carry
from a2pg.memory import MemoryStore
from a2pg.sqlite import SqliteStore, upgrade

CARRIED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

async def on(store):
    plain = (await store.append("s", [NewEvent("a")])).events[0].trace_parent
    with carry(CARRIED):
        carried = (await store.append("s", [NewEvent("b")])).events[0].trace_parent
    read = [e.trace_parent for e in await store.read("s")]
    await store.close()
    return [plain, carried, read]

async def main():
    path = Path(tempfile.mkdtemp()) / "a2.db"
    upgrade(path)
    found = {
        "memory": await on(MemoryStore()),
        "sqlite": await on(await SqliteStore.open(path)),
        "loaded": sorted(
            m for m, mod in sys.modules.items() if mod is not None and m.startswith("opentelemetry")
        ),
    }
    print(json.dumps(found))

asyncio.run(main())
"""

CARRIED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
ROOT = Path(__file__).resolve().parents[2]


def run(mode: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize("mode", ["blocked", "installed"])
def test_appends_store_none_or_the_carried_context_without_opentelemetry(mode: str) -> None:
    found = run(mode)
    for backend in ("memory", "sqlite"):
        assert found[backend] == [None, CARRIED, [None, CARRIED]], backend
    assert found["loaded"] == []  # never imported: blocked, or only unused


def test_the_block_is_real() -> None:
    """The blocked run cannot import it (so the test above cannot pass by accident)."""
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nsys.modules['opentelemetry'] = None\nimport opentelemetry.trace",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "ModuleNotFoundError" in probe.stderr or "ImportError" in probe.stderr
