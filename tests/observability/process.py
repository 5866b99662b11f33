"""``a2pg worker`` as a real process for these tests: its stderr read as it comes, bounded waits.

The process runs ``a2pg.cli.main`` with this interpreter (so the checkout under test is
what runs); ``blocked`` names modules made unimportable first, as if an optional extra
were not installed.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType

from ..worker.helpers import TIMEOUT, bounded, until

ROOT = Path(__file__).resolve().parents[2]

LAUNCH = """\
import sys
for name in sys.argv.pop(1).split(","):
    if name:
        sys.modules[name] = None  # importing it now raises ImportError
from a2pg.cli import main
sys.exit(main())
"""

WITHOUT_EXTRAS = ("prometheus_client", "opentelemetry")


def a2pg_command(*argv: str, blocked: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-c", LAUNCH, ",".join(blocked), *argv]


async def eventually(check: Callable[[], Awaitable[bool]], *, within: float = 20.0) -> None:
    """Checks again every 50 ms until ``check()`` holds, for at most ``within`` seconds."""

    async def poll() -> None:
        while not await check():  # noqa: ASYNC110 - the condition is in another process
            await asyncio.sleep(0.05)

    await bounded(poll(), within=within)


class WorkerProcess:
    """``a2pg *argv`` running; ``lines`` is its stderr so far, line by line."""

    def __init__(self, *argv: str, blocked: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            a2pg_command(*argv, blocked=blocked),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, name="worker-stderr", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def err(self) -> str:
        return "\n".join(self.lines)

    def find(self, pattern: str) -> re.Match[str] | None:
        for line in list(self.lines):
            found = re.search(pattern, line)
            if found:
                return found
        return None

    async def wait_for(self, pattern: str, *, within: float = TIMEOUT) -> re.Match[str]:
        """The first stderr line matching ``pattern``; fails if the process exits first."""

        def seen_or_gone() -> bool:
            return self.find(pattern) is not None or self.proc.poll() is not None

        await until(seen_or_gone, within=within)
        found = self.find(pattern)
        assert found is not None, f"no line matching {pattern!r}; stderr:\n{self.err}"
        return found

    async def stop(self, *, within: float = 30.0) -> int:
        """SIGTERM, then its exit code once it has exited and its stderr is read."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(asyncio.to_thread(self.proc.wait), within)
        await asyncio.wait_for(asyncio.to_thread(self._reader.join), within)
        return code

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)


def run_a2pg(*argv: str, blocked: tuple[str, ...] = (), timeout: float = 60) -> tuple[int, str]:
    """``a2pg *argv`` to its end: exit code and stderr."""
    proc = subprocess.run(
        a2pg_command(*argv, blocked=blocked),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, proc.stderr
