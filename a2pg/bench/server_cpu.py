"""The CPU seconds a local PostgreSQL server has used, from Linux's ``/proc``.

A server is its postmaster and the processes it forked (backends, background
workers): the postmaster's own time, the time of the children it has reaped
(``cutime``/``cstime``: a backend that exited is counted there), and the time of the
children still running. The difference of two readings is what the server spent in
between, whoever was connected.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command's parenthesis (field 3 on), or None."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _ticks(fields: list[str], *, reaped: bool) -> int:
    # Fields 14-17 of stat(5) (utime stime cutime cstime) are 11-14 here (field 3 is 0).
    used = int(fields[11]) + int(fields[12])
    return used + (int(fields[13]) + int(fields[14]) if reaped else 0)


def server_cpu(postmaster: int) -> float:
    """CPU seconds (user and system) of the server whose postmaster is ``postmaster``."""
    own = _fields(postmaster)
    if own is None:
        raise RuntimeError(f"no process {postmaster}: is the server running on this machine?")
    total = _ticks(own, reaped=True)
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _fields(int(entry.name))
        if fields is not None and fields[1] == str(postmaster):  # field 4: the parent
            total += _ticks(fields, reaped=True)
    return total / TICKS
