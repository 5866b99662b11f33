"""A progress bar on stderr for long CLI runs (a plain line now and then when not a terminal)."""

from __future__ import annotations

import time
from typing import TextIO

WIDTH = 30
PLAIN_EVERY = 5.0
"""Seconds between progress lines when stderr is not a terminal (logs, CI)."""


class ProgressBar:
    """Shows ``done/total`` with a rate; redraws in place on a terminal."""

    def __init__(self, total: int, stream: TextIO, *, label: str = "done") -> None:
        self._total = max(total, 1)
        self._stream = stream
        self._label = label
        self._tty = stream.isatty()
        self._born = self._started = time.perf_counter()
        self._last_plain = self._started
        self._drawn = False

    def say(self, text: str) -> None:
        """A status line (what the command is doing now), with the time since it began."""
        elapsed = time.perf_counter() - self._born
        prefix = "\r\x1b[K" if self._tty else ""
        self._stream.write(f"{prefix}[{elapsed:5.1f}s] {text}\n")
        self._stream.flush()

    def start(self) -> None:
        """Restarts the clock (the bar is made before the slow setup it should not count)."""
        self._started = self._last_plain = time.perf_counter()

    def line(self, done: int, note: str = "") -> str:
        elapsed = time.perf_counter() - self._started
        filled = min(WIDTH, WIDTH * done // self._total)
        rate = done / elapsed if elapsed > 0 else 0.0
        bar = "#" * filled + "." * (WIDTH - filled)
        extra = f"  {note}" if note else ""
        return (
            f"[{bar}] {done:,}/{self._total:,} {self._label}  {rate:,.0f}/s  {elapsed:5.1f}s{extra}"
        )

    def update(self, done: int, note: str = "") -> None:
        if self._tty:
            self._stream.write("\r" + self.line(done, note) + "\x1b[K")
            self._stream.flush()
            self._drawn = True
        elif time.perf_counter() - self._last_plain >= PLAIN_EVERY:
            self._last_plain = time.perf_counter()
            self._stream.write(self.line(done, note) + "\n")
            self._stream.flush()

    def finish(self, done: int, note: str = "") -> None:
        """Leaves the final state on its own line."""
        prefix = "\r" if self._tty else ""
        suffix = "\x1b[K" if self._tty else ""
        self._stream.write(prefix + self.line(done, note) + suffix + "\n")
        self._stream.flush()
