"""Options derived from settings dataclasses: one per field, defaults shown, bad values exit 2."""

from __future__ import annotations

import argparse
import dataclasses
import re
import typing
from dataclasses import dataclass, field
from typing import Any

import pytest

from a2pg.backoff import Backoff
from a2pg.bench.config import BenchConfig
from a2pg.cli.admin import worker_settings
from a2pg.cli.common import EXIT_USAGE, CliError
from a2pg.cli.main import build_parser
from a2pg.cli.options import add_options, from_args, option_name
from a2pg.demo.config import DemoConfig
from a2pg.worker import WorkerSettings

from .conftest import Cli

SOMEWHERE = "postgresql://postgres@127.0.0.1:1/nothing"
"""A well-formed DSN: these tests fail before anything connects."""

RETRY_OPTIONS = ("--retry-base", "--retry-cap")
"""``WorkerSettings.backoff`` on the command line."""

KNOB_TYPES = typing.get_type_hints(WorkerSettings)


def flat(text: str) -> str:
    """Help text with argparse's line wrapping undone."""
    return " ".join(text.split())


def expected_help(spec: dataclasses.Field[Any]) -> str:
    """How ``--help`` shows a field: flag, metavar, help, then its default if it has one."""
    text = f"{option_name(spec.name)} {spec.name.upper()} {spec.metadata['help']}"
    if spec.default is not None and spec.default is not dataclasses.MISSING:
        text += f" (default: {spec.default})"
    return text


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    ("command", "settings"),
    [("worker", WorkerSettings), ("demo", DemoConfig), ("bench", BenchConfig)],
)
def test_help_shows_an_option_per_field_with_its_help_and_default(
    cli: Cli, command: str, settings: type[WorkerSettings | DemoConfig | BenchConfig]
) -> None:
    shown = flat(cli(command, "--help").out)
    for spec in dataclasses.fields(settings):
        if spec.name == "backoff":
            for option in RETRY_OPTIONS:
                assert f"{option} {option[2:].replace('-', '_').upper()} " in shown
            continue
        assert expected_help(spec) in shown, spec.name


def test_worker_help_states_the_defaults(cli: Cli) -> None:
    shown = flat(cli("worker", "--help").out)
    for text in (
        "--concurrency CONCURRENCY handlers running at once (default: 64)",
        "--claim-batch CLAIM_BATCH heads per claim; default: --concurrency",
        "--ttl TTL lease seconds (default: 30.0)",
        "--flush-interval FLUSH_INTERVAL",
        "(default: 0.005)",
        "--renew-interval RENEW_INTERVAL seconds between lease renewals; default: --ttl / 3",
        "--holder HOLDER claim holder name; default: host:pid:random",
        "doubles per failure (default: 1.0)",
        "longest wait before a retry, seconds (default: 300.0)",
        "--no-listen",
        "--log-level",
    ):
        assert text in shown


def test_unset_options_give_the_settings_defaults() -> None:
    settings = worker_settings(parse("worker", "m:app"))
    assert settings == WorkerSettings(holder=settings.holder)
    assert from_args(DemoConfig, parse("demo")) == DemoConfig()
    assert from_args(BenchConfig, parse("bench")) == BenchConfig()


def test_every_worker_option_reaches_the_settings() -> None:
    args = parse(
        "worker",
        "m:app",
        *("--concurrency", "6", "--claim-batch", "3", "--ttl", "12", "--max-failures", "2"),
        *("--flush-interval", "0.5", "--flush-size", "4", "--poll-interval", "0.25"),
        *("--holder", "h1", "--shutdown-grace", "7", "--renew-interval", "2.5"),
        *("--cleanup-timeout", "4", "--retry-base", "2", "--retry-cap", "9"),
        *("--heartbeat-interval", "0.5", "--attempt-timeout", "90"),
    )
    assert worker_settings(args) == WorkerSettings(
        concurrency=6,
        claim_batch=3,
        ttl=12.0,
        max_failures=2,
        flush_interval=0.5,
        flush_size=4,
        poll_interval=0.25,
        holder="h1",
        shutdown_grace=7.0,
        renew_interval=2.5,
        cleanup_timeout=4.0,
        heartbeat_interval=0.5,
        backoff=Backoff(base=2.0, cap=9.0),
        attempt_timeout=90.0,
    )


def test_retry_options_fill_in_each_other() -> None:
    assert worker_settings(parse("worker", "m:app", "--retry-base", "500")).backoff == Backoff(
        base=500.0, cap=500.0
    )
    assert worker_settings(parse("worker", "m:app", "--retry-cap", "5")).backoff == Backoff(
        base=1.0, cap=5.0
    )


@pytest.mark.parametrize(
    "option",
    [option_name(name) for name, kind in KNOB_TYPES.items() if kind in (int, float)]
    + list(RETRY_OPTIONS),
)
@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_a_bad_number_exits_2_with_one_error_line(cli: Cli, option: str, value: str) -> None:
    result = cli("worker", "m:app", option, value, "--dsn", SOMEWHERE)
    assert result.code == 2
    assert "Traceback" not in result.err
    errors = [line for line in result.err.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert errors[0].startswith(f"a2pg worker: error: argument {option}: ")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--retry-base", "5", "--retry-cap", "1"],
            "--retry-cap (1.0) must be at least --retry-base (5.0)",
        ),
        (["--retry-cap", "0.5"], "--retry-cap (0.5) must be at least --retry-base (1.0)"),
        (["--retry-base", "inf"], "Backoff.base must be a positive number of seconds, got inf"),
        (
            ["--retry-cap", "3e11"],
            "Backoff.cap must be at least base (1.0) and at most 3155760000 seconds, "
            "got 300000000000.0",
        ),
        (
            ["--ttl", "3e11"],
            "ttl must be above 0 and at most 3155760000 seconds, got 300000000000.0",
        ),
        (  # 12.7 years: within the settings' century, past what the store takes
            ["--ttl", "4e8"],
            "ttl must be at most 315576000 seconds, the store's limit (Limits.max_seconds), "
            "got 400000000.0",
        ),
        (
            ["--heartbeat-interval", "4e8"],
            "heartbeat_interval must be at most 315576000 seconds, the store's limit "
            "(Limits.max_seconds), got 400000000.0",
        ),
        (
            ["--retry-cap", "4e8"],
            "Backoff.cap must be at most 315576000 seconds, the store's limit "
            "(Limits.max_seconds), got 400000000.0",
        ),
    ],
)
def test_bad_retry_options_exit_2_before_loading_the_app(
    cli: Cli, argv: list[str], message: str
) -> None:
    result = cli("worker", "nowhere.to.be.found:app", *argv, "--dsn", SOMEWHERE)
    assert result.code == 2
    assert result.err.strip() == f"a2pg: error: {message}"


@dataclass(frozen=True)
class Sized:
    low: int = field(default=1, metadata={"help": "the least"})
    high: int = field(default=2, metadata={"help": "the most"})
    label: str = field(default="x", metadata={"help": "a name"})

    def __post_init__(self) -> None:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) must be at least low ({self.low})")


def sized_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t")
    add_options(parser, Sized)
    return parser


def test_from_args_builds_the_dataclass_and_reports_a_refusal_as_a_usage_error() -> None:
    parser = sized_parser()
    assert from_args(Sized, parser.parse_args(["--high", "5", "--label", "y"])) == Sized(1, 5, "y")
    assert from_args(Sized, parser.parse_args([]), label="z") == Sized(1, 2, "z")
    with pytest.raises(CliError) as refused:
        from_args(Sized, parser.parse_args(["--low", "3"]))
    assert refused.value.exit_code == EXIT_USAGE
    assert refused.value.message == "high (2) must be at least low (3)"


def test_a_field_without_an_option_type_must_be_skipped() -> None:
    parser = argparse.ArgumentParser(prog="t")
    with pytest.raises(TypeError, match=re.escape("WorkerSettings.backoff")):
        add_options(parser, WorkerSettings)
    add_options(parser, WorkerSettings, skip={"backoff"})
    assert option_name("claim_batch") == "--claim-batch"
