"""``a2pg dead-letters``: every session's or one's, ``--consumer``, ``--error``, ``--limit``
(keyset pages of ``find_dead_letters``) and ``--traceback``, on PostgreSQL and SQLite."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from a2pg.cli import inspect
from a2pg.contract.limits import DEFAULT_LIMITS
from a2pg.models import Claimed, NewEvent, Target
from a2pg.postgres import PostgresStore
from a2pg.sqlite import SqliteStore
from a2pg.store import Store

from .conftest import Cli

SOMEWHERE = "postgresql://postgres@127.0.0.1:1/nothing"
"""A well-formed DSN nothing listens on: usage errors come before anything connects."""

REPLY = Target("reply", "turns")
MAILER = Target("mailer")
DEAD = [
    ("s1", REPLY, "RuntimeError: model crashed"),
    ("s1", MAILER, "TimeoutError: SMTP timeout"),
    ("s10", REPLY, "RuntimeError: Model CRASHED again"),
    ("s2", MAILER, "OSError: smtp TIMEOUT"),
    ("s2", Target("reply", "other"), "ValueError: bad turn"),
]
"""Five dead letters: s10 shares s1's prefix; errors differ in case only."""

ALL = [
    ("s1", "mailer", None),
    ("s1", "reply", "turns"),
    ("s10", "reply", "turns"),
    ("s2", "mailer", None),
    ("s2", "reply", "other"),
]
"""Every dead letter, in (session, consumer, lane, index) order (an event cursor first)."""


def traceback_of(error: str) -> str:
    return f"Traceback (most recent call last):\n  File x, line 1\n    raise it\n{error}\n"


async def dead_letter(store: Store, session: str, target: Target, error: str) -> None:
    """Appends an event for ``target`` and dead-letters its head with a traceback."""
    await store.append(session, [NewEvent("job", None, targets=(target,))])
    claimed = await store.claim_available(session, holder="t", ttl=30)
    assert isinstance(claimed, Claimed)
    (head,) = (h for h in claimed.heads if (h.consumer, h.lane) == (target.consumer, target.lane))
    failed = await store.fail_attempt(
        session,
        consumer=head.consumer,
        lane=head.lane,
        index=head.index,
        attempt=head.attempt,
        error=traceback_of(error),
        max_failures=1,
    )
    assert failed.outcome == "dead_lettered"


async def populate(store: Store) -> None:
    for session, target, error in DEAD:
        await dead_letter(store, session, target, error)
    await store.append("s3", [NewEvent("job", None, targets=(MAILER,))])  # pending, alive


Work = Callable[[Store], Awaitable[Any]]


def on_postgres(dsn: str, work: Work) -> Any:
    async def run() -> Any:
        store = await PostgresStore.open(dsn)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())


def on_sqlite(path: Path, work: Work) -> Any:
    async def run() -> Any:
        store = await SqliteStore.open(path, migrate=True)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())


@pytest.fixture(
    params=[pytest.param("postgres", marks=pytest.mark.postgres), pytest.param("sqlite")]
)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """The populated database's options: ``--dsn DSN`` or ``--sqlite PATH``."""
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("postgres_dsn")
        on_postgres(dsn, populate)
        return ("--dsn", dsn)
    path = tmp_path / "a2.db"
    on_sqlite(path, populate)
    return ("--sqlite", str(path))


def listed(cli: Cli, *argv: str) -> list[tuple[str, str, str | None]]:
    """(session, consumer, lane) of each head ``dead-letters --json`` lists."""
    result = cli("dead-letters", *argv, "--json")
    assert result.code == 0, result
    return [(h["event"]["session_id"], h["consumer"], h["lane"]) for h in json.loads(result.out)]


def rows(text: str) -> list[list[str]]:
    """The table's rows, split into words (the header and its rule left out)."""
    return [line.split() for line in text.splitlines()[2:] if line[:1] == "s"]


# -- usage errors, before anything connects --------------------------------------------


TOO_LONG_NAME = "x" * (DEFAULT_LIMITS.max_name_length + 1)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--consumer", ""], "--consumer: consumer name must not be empty"),
        (["--consumer", TOO_LONG_NAME], "--consumer: consumer name is "),
        (["--error", ""], "--error: error filter must not be empty"),
        (["--error", "a\x00b"], "--error: error filter must not contain NUL"),
        (["s\x001"], "SESSION: session id must not contain NUL"),
        (["--limit", "0"], "argument --limit: must be at least 1, got 0"),
        (["--limit", "many"], "argument --limit: must be a whole number of 1 or more"),
    ],
    ids=["empty consumer", "long consumer", "empty error", "NUL error", "NUL session", "0", "x"],
)
def test_bad_filters_exit_2_before_connecting(cli: Cli, argv: list[str], message: str) -> None:
    result = cli("dead-letters", *argv, "--dsn", SOMEWHERE)
    assert result.code == 2, result  # 3 (unreachable) had it connected
    assert message in result.err, result.err
    assert result.err.startswith("a2pg: error: ") or "usage:" in result.err
    assert result.err.strip().splitlines()[-1].startswith("a2pg")
    assert result.out == ""


# -- listing and filters ---------------------------------------------------------------


def test_without_filters_every_dead_letter_is_listed(cli: Cli, where: tuple[str, str]) -> None:
    assert listed(cli, *where) == ALL
    assert listed(cli, "s1", *where) == ALL[:2]  # not s10's, though it shares the prefix
    assert listed(cli, "s3", *where) == []
    table = cli("dead-letters", *where)
    assert table.code == 0, table
    assert [row[:3] for row in rows(table.out)] == [
        ["s1", "mailer", "2"],
        ["s1", "reply", "turns"],
        ["s10", "reply", "turns"],
        ["s2", "mailer", "1"],
        ["s2", "reply", "other"],
    ]
    assert "Traceback" not in table.out and "(the first" not in table.out
    assert "RuntimeError: model crashed" in table.out  # the gist: the last line
    assert cli("dead-letters", "s3", *where).out == "no dead letters\n"


FILTERS: list[tuple[list[str], list[tuple[str, str, str | None]]]] = [
    (["--consumer", "mailer"], [ALL[0], ALL[3]]),
    (["--consumer", "nobody"], []),
    (["--error", "smtp timeout"], [ALL[0], ALL[3]]),
    (["--error", "CRASHED"], [ALL[1], ALL[2]]),
    (["--error", "crashed", "--consumer", "mailer"], []),
    (["--error", "Error:", "--consumer", "reply"], [ALL[1], ALL[2], ALL[4]]),
    (["s1", "--error", "crash"], [ALL[1]]),
    (["s2", "--consumer", "reply"], [ALL[4]]),
    (["s10", "--consumer", "mailer"], []),
]


@pytest.mark.parametrize(("argv", "expected"), FILTERS, ids=lambda v: " ".join(map(str, v)))
def test_filters_must_all_match(
    cli: Cli,
    where: tuple[str, str],
    argv: list[str],
    expected: list[tuple[str, str, str | None]],
) -> None:
    assert listed(cli, *argv, *where) == expected


def test_a_filter_matching_nothing_says_so(cli: Cli, where: tuple[str, str]) -> None:
    result = cli("dead-letters", "--consumer", "nobody", *where)
    assert (result.code, result.out) == (0, "no dead letters match\n")


def test_an_unknown_session_exits_5(cli: Cli, where: tuple[str, str]) -> None:
    result = cli("dead-letters", "nope", "--error", "x", *where)
    assert result.code == 5
    assert result.err == "a2pg: error: unknown session 'nope'\n"


# -- --limit and keyset pages ----------------------------------------------------------


@pytest.mark.parametrize("page", [1, 2, 100])
def test_limit_lists_the_first_heads_across_pages(
    cli: Cli, where: tuple[str, str], page: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small pages make each listing span several ``find_dead_letters`` calls."""
    monkeypatch.setattr(inspect, "DEAD_LETTER_PAGE", page)
    assert listed(cli, *where) == ALL
    for limit in range(1, len(ALL) + 2):
        assert listed(cli, "--limit", str(limit), *where) == ALL[:limit], limit
    assert listed(cli, "--limit", "1", "--error", "timeout", *where) == [ALL[0]]
    assert listed(cli, "s2", "--limit", "1", *where) == [ALL[3]]
    assert listed(cli, "s1", "--limit", "2", *where) == ALL[:2]


def test_limit_says_when_more_match(cli: Cli, where: tuple[str, str]) -> None:
    cut = cli("dead-letters", "--limit", "2", *where)
    assert cut.code == 0, cut
    assert [row[:2] for row in rows(cut.out)] == [["s1", "mailer"], ["s1", "reply"]]
    assert "(the first 2; more match: raise --limit)\n" in cut.out
    whole = cli("dead-letters", "--limit", str(len(ALL)), *where)
    assert len(rows(whole.out)) == len(ALL) and "more match" not in whole.out
    in_session = cli("dead-letters", "s1", "--limit", "2", *where)
    assert "more match" not in in_session.out  # s10's are another session's


# -- --traceback -----------------------------------------------------------------------


def test_traceback_prints_each_heads_whole_last_error(cli: Cli, where: tuple[str, str]) -> None:
    result = cli("dead-letters", "--consumer", "reply", "--error", "crash", "--traceback", *where)
    assert result.code == 0, result
    table, first, second = result.out.split("\n\n")
    assert [row[:3] for row in rows(table)] == [["s1", "reply", "turns"], ["s10", "reply", "turns"]]
    assert table.endswith(
        "BLOCKED lanes hold back their later events until redriven "
        "(`a2pg redrive SESSION CONSUMER INDEX --lane LANE --retry|--skip`)"
    )
    lines = first.splitlines()
    assert lines[0].startswith("s1:reply/turns@1 (1 failure, dead-lettered 2")
    assert lines[0].endswith("Z):")
    assert lines[1:] == [
        "  Traceback (most recent call last):",
        "    File x, line 1",
        "      raise it",
        "  RuntimeError: model crashed",
    ]
    assert second.startswith("s10:reply/turns@1 (1 failure, dead-lettered ")
    assert second.endswith(
        "):\n  Traceback (most recent call last):\n    File x, line 1\n"
        "      raise it\n  RuntimeError: Model CRASHED again\n"
    )


def test_json_carries_the_whole_last_error_and_ignores_traceback(
    cli: Cli, where: tuple[str, str]
) -> None:
    plain = cli("dead-letters", "--consumer", "mailer", "--json", *where)
    with_flag = cli("dead-letters", "--consumer", "mailer", "--json", "--traceback", *where)
    assert plain.out == with_flag.out
    heads = json.loads(plain.out)
    assert [h["dispatch"]["last_error"] for h in heads] == [
        traceback_of("TimeoutError: SMTP timeout"),
        traceback_of("OSError: smtp TIMEOUT"),
    ]
    assert [h["blocked"] for h in heads] == [False, False]
