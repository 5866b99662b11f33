"""The documentation site stays complete: its generated pages name everything there is.

``docs/hooks/cli_reference.py`` writes the CLI reference from ``build_parser()`` at
build time; these tests walk the parser on their own and check the page names every
command, subcommand, argument and option, so a CLI change the renderer cannot show
fails here, not in a reader's hands. The API page must document every name
``a2pg`` exports. ``mkdocs build --strict`` itself runs in ``.ci/run``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import a2pg
from a2pg.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def load_hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"a2pg_docs_{name}", DOCS / "hooks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command and subcommand parser, with its path of names (``("worker",)``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from walk(sub, (*path, name))


@pytest.fixture(scope="module")
def cli_page() -> str:
    page: str = load_hook("cli_reference").render(build_parser())
    return page


def test_the_cli_page_has_a_section_per_command(cli_page: str) -> None:
    commands = list(walk(build_parser()))
    assert len(commands) >= 10  # migrate, check, worker, demo, bench, sessions, ...
    for path, _ in commands:
        heading = f"a2pg {' '.join(path)} {{#{'-'.join(path)}}}"
        assert re.search(rf"^#+ {re.escape(heading)}$", cli_page, re.MULTILINE), heading


def test_the_cli_page_names_every_argument_and_option(cli_page: str) -> None:
    for path, parser in [((), build_parser()), *walk(build_parser())]:
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            if not action.option_strings:
                assert f"`{action.metavar or action.dest}`" in cli_page, (path, action.dest)
            for option in action.option_strings:
                assert f"`{option}" in cli_page, (path, option)


def test_the_cli_page_shows_defaults_choices_and_exit_codes(cli_page: str) -> None:
    assert "`--concurrency CONCURRENCY`: handlers running at once (default: 64)" in cli_page
    assert "one of `none`, `session`, `transaction`" in cli_page
    assert "4  database not migrated" in cli_page
    assert "A2PG_DSN" in cli_page


def test_the_cli_page_escapes_markdown_outside_code() -> None:
    hook = load_hook("cli_reference")
    assert hook.text("tables <schema>_x and `<kept>` *a*") == (
        r"tables &lt;schema&gt;_x and `<kept>` \*a\*"
    )


def test_the_site_builds_the_cli_page_with_the_hook() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert "docs/hooks/cli_reference.py" in config
    assert "reference/cli.md" in config
    assert not (DOCS / "reference" / "cli.md").exists(), "generated at build time, never stored"


def documented_modules(page: str) -> dict[str, set[str] | None]:
    """Module path -> the members its ``:::`` block lists (None: all of them)."""
    blocks: dict[str, set[str] | None] = {}
    for match in re.finditer(r"^::: ([\w.]+)\n((?:[ \t]+.*\n)*)", page, re.MULTILINE):
        members = re.search(r"^\s+members: \[(.*)\]$", match.group(2), re.MULTILINE)
        listed = None if members is None else {m.strip() for m in members.group(1).split(",")}
        blocks[match.group(1)] = listed
    return blocks


def rendered_names(path: str, members: set[str] | None) -> set[str]:
    """What a ``::: path`` block shows: a module's own top-level names and its ``__all__``
    (or only ``members``), or the one class or function ``path`` names."""
    try:
        module = importlib.import_module(path)
    except ModuleNotFoundError:
        return {path.rpartition(".")[2]}
    tree = ast.parse(Path(str(module.__file__)).read_text())
    names = set(getattr(module, "__all__", ()))
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names if members is None else names & members


def test_the_api_page_documents_every_exported_name() -> None:
    blocks = documented_modules((DOCS / "reference" / "api.md").read_text())
    shown = set().union(
        *(rendered_names(path, members) for path, members in blocks.items() if path != "a2pg")
    )
    missing = sorted(set(a2pg.__all__) - shown)
    assert missing == [], f"add these to docs/reference/api.md: {missing}"


def test_the_cli_page_renders_nested_subcommands() -> None:
    parser = argparse.ArgumentParser(prog="a2pg")
    commands = parser.add_subparsers(dest="command")
    workers = commands.add_parser("workers", help="list or forget workers")
    actions = workers.add_subparsers(dest="action")
    forget = actions.add_parser("forget", help="drop a worker's row")
    forget.add_argument("holder", metavar="HOLDER", help="the worker")
    forget.add_argument("--stale", action="store_true", help="every stale worker")
    page = load_hook("cli_reference").render(parser)
    assert "### a2pg workers forget {#workers-forget}" in page
    assert "- `HOLDER`: the worker" in page
    assert "- `--stale`: every stale worker" in page


def named_blocks(page: Path) -> dict[str, str]:
    """The page's Python blocks that open with a ``# file.py`` line, by file name."""
    blocks = re.findall(r"```python\n# (\w+\.py)\n(.*?)```", page.read_text(), re.DOTALL)
    return {name: body for name, body in blocks}


Load = Callable[..., dict[str, ModuleType]]


@pytest.fixture
def page_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Load]:
    """``load(page, *modules)``: the page's ``# file.py`` blocks written as files, and the
    modules named imported from them (by module name); forgotten after the test."""
    loaded: list[str] = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(page: str, *names: str) -> dict[str, ModuleType]:
        blocks = named_blocks(DOCS / page)
        for name, body in blocks.items():
            (tmp_path / name).write_text(body)
            sys.modules.pop(name.removesuffix(".py"), None)
        loaded.extend(blocks)
        return {name: importlib.import_module(name) for name in names}

    yield load
    for name in loaded:
        sys.modules.pop(name.removesuffix(".py"), None)


async def test_the_getting_started_app_and_its_test_run(
    page_modules: Load,
) -> None:
    """The page's ``jobs.py`` and ``test_jobs.py``, run as written, on MemoryStore
    (``say.py`` needs a database: its store calls are the same as the test's)."""
    assert {"jobs.py", "test_jobs.py", "say.py"} <= set(named_blocks(DOCS / "getting-started.md"))
    modules = page_modules("getting-started.md", "test_jobs")
    await modules["test_jobs"].test_reply_answers_on_its_lane()


async def test_the_testing_page_memory_tests_pass(
    page_modules: Load,
) -> None:
    modules = page_modules("testing.md", "test_handlers", "test_both")
    await modules["test_handlers"].test_a_failing_handler_is_retried_then_dead_lettered()
    await modules["test_both"].test_the_first_event_is_at_index_1(a2pg.MemoryStore())


async def test_the_testing_page_postgres_test_passes(
    page_modules: Load, postgres_store: Any
) -> None:
    modules = page_modules("testing.md", "test_on_postgres")
    await modules["test_on_postgres"].test_a_dead_letter_on_postgres(postgres_store)


async def test_the_testing_page_two_backend_test_passes_on_postgres(
    page_modules: Load, postgres_store: Any
) -> None:
    modules = page_modules("testing.md", "test_both")
    await modules["test_both"].test_the_first_event_is_at_index_1(postgres_store)


RUNNABLE = "# Runs as is, on MemoryStore.\n"


def runnable_examples() -> list[tuple[str, str]]:
    """Every Python block of the site that says it runs as is, with where it is."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for number, body in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S)):
            if body.startswith(RUNNABLE):
                found.append((f"{page.relative_to(DOCS)}#{number}", body))
    return found


def test_the_concept_pages_have_runnable_examples() -> None:
    pages = {where.partition("#")[0] for where, _ in runnable_examples()}
    assert {"concepts/sessions.md", "concepts/claims.md", "concepts/failures.md"} <= pages


PRINT = re.compile(r"^[ \t]*print\(.*?\)(?:[ \t]+# (.*)|\n[ \t]*# (.*))?$", re.MULTILINE)


def promised_output(code: str) -> list[str | None]:
    """What each ``print`` of an example says it prints: its comment, on its line or the
    next (``None``: no comment)."""
    return [same or below or None for same, below in PRINT.findall(code)]


def keeps_promise(printed: str, promise: str) -> bool:
    """The comment is the printed line, or the line then an explanation after , : ; or (."""
    if promise == printed:
        return True
    rest = promise.removeprefix(printed)
    return rest != promise and (rest[:1] in (":", ",", ";") or rest.startswith(" ("))


@pytest.mark.parametrize(("where", "code"), runnable_examples(), ids=lambda v: str(v)[:40])
def test_a_runnable_example_prints_what_it_says(
    where: str, code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs the block; each of its prints (none inside a loop) printed what its comment says."""
    exec(compile(code, where, "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out.splitlines()
    promises = promised_output(code)
    assert promises and None not in promises, f"{where}: every print needs its output comment"
    assert len(printed) == len(promises), printed
    for line, promise in zip(printed, promises, strict=True):
        assert promise is not None and keeps_promise(line, promise), (where, line, promise)


def test_an_example_that_prints_something_else_fails_the_check() -> None:
    assert keeps_promise("2 1", "2 1: the lapsed lease counted a failure")
    assert keeps_promise("[2]", "[2]")
    assert not keeps_promise("2 1", "2 10")
    assert not keeps_promise("True", "False")
    assert promised_output("print(1)  # 1\nprint(\n    2)\nprint(x)\n# x\n") == ["1", "x"]
