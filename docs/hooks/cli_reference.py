"""MkDocs hook: writes ``reference/cli.md`` from ``a2pg.cli.main.build_parser()`` at build time.

The page is never stored, so it cannot drift from the parser: every command and
subcommand, with its help, usage, arguments, options, defaults and choices, and the
exit codes and environment variables ``a2pg --help`` prints. ``tests/test_docs.py``
checks that it names everything the parser knows.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from typing import Any

PAGE = "reference/cli.md"
USAGE_WIDTH = 80
"""Columns of the usage lines, fixed so the page does not depend on the terminal."""

_MARKDOWN_SPECIAL = re.compile(r"[<>&*\\\[\]]")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, one-line help, parser)`` of each subcommand of ``parser``, in declared order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias of a command already listed
                    continue
                seen.add(id(sub))
                yield name, helps.get(name, ""), sub


def text(value: str) -> str:
    """Prose for Markdown: code spans kept, characters Markdown would act on escaped."""
    out, last = [], 0
    for match in _CODE_SPAN.finditer(value):
        out.append(_escape(value[last : match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(_escape(value[last:]))
    return "".join(out)


def _escape(value: str) -> str:
    entities = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
    return _MARKDOWN_SPECIAL.sub(lambda m: entities.get(m.group(0), "\\" + m.group(0)), value)


def paragraphs(value: str) -> list[str]:
    """A help text's paragraphs, each on one line (argparse descriptions wrap by hand)."""
    blocks = re.split(r"\n\s*\n", value.strip())
    return [" ".join(line.strip() for line in block.splitlines()) for block in blocks if block]


def usage(parser: argparse.ArgumentParser) -> str:
    make: Any = parser.formatter_class  # typeshed's protocol omits the width argument
    formatter = make(prog=parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    shown: str = formatter.format_help()
    return shown.strip()


def help_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The option's help with its default (not for flags, whose default is their absence)
    and its choices."""
    formatter: Any = argparse.HelpFormatter(prog=parser.prog)
    shown = formatter._expand_help(action) if action.help else ""
    default = action.default
    shown_default = action.nargs != 0 and default not in (None, False, argparse.SUPPRESS)
    if shown_default and "default" not in shown:
        shown += f" (default: {default})"
    if action.choices is not None:
        choices = ", ".join(f"`{choice}`" for choice in action.choices)
        shown = f"{text(shown)}; one of {choices}" if shown else f"one of {choices}"
        return shown
    return text(shown)


def item(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """One argument or option as a list item: its label, then its help if it has one."""
    described = help_text(parser, action)
    return f"- {option_label(action)}: {described}" if described else f"- {option_label(action)}"


def option_label(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar or action.dest
        optional = action.nargs in ("?", "*")
        label = f"`{name}`"
        return f"{label} (optional)" if optional else label
    if action.nargs == 0:
        return ", ".join(f"`{s}`" for s in action.option_strings)
    metavar = action.metavar or action.dest.upper()
    return ", ".join(f"`{s} {metavar}`" for s in action.option_strings)


def documented(action: argparse.Action) -> bool:
    return not isinstance(action, argparse._HelpAction | argparse._SubParsersAction) and (
        action.help != argparse.SUPPRESS
    )


def option_keys(parser: argparse.ArgumentParser) -> set[tuple[str, ...]]:
    return {tuple(a.option_strings) for a in parser._actions if documented(a) and a.option_strings}


def exclusive_groups(parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for group in parser._mutually_exclusive_groups:
        names = " | ".join(f"`{a.option_strings[0]}`" for a in group._group_actions)
        kind = "exactly one of" if group.required else "at most one of"
        lines.append(f"- {kind} {names}")
    return lines


def command_section(
    path: list[str],
    summary: str,
    parser: argparse.ArgumentParser,
    global_keys: set[tuple[str, ...]],
    global_epilog: str,
) -> list[str]:
    depth = min(len(path) + 1, 6)
    anchor = "-".join(path)
    lines = [f"{'#' * depth} a2pg {' '.join(path)} {{#{anchor}}}", ""]
    description = parser.description or summary
    lines += [p for para in paragraphs(description) for p in (text(para), "")]
    lines += ["```text", usage(parser), "```", ""]
    positionals = [a for a in parser._actions if documented(a) and not a.option_strings]
    if positionals:
        lines += ["**Arguments**", ""]
        lines += [item(parser, a) for a in positionals]
        lines.append("")
    shared = option_keys(parser) & global_keys
    options = [
        a
        for a in parser._actions
        if documented(a) and a.option_strings and tuple(a.option_strings) not in shared
    ]
    if options:
        lines += ["**Options**", ""]
        lines += [item(parser, a) for a in options]
        lines.append("")
    groups = exclusive_groups(parser)
    if groups:
        lines += ["**Choose**", "", *groups, ""]
    if shared:
        names = ", ".join(f"`{key[0]}`" for key in sorted(shared))
        lines += [f"Also takes the [global options](#global-options): {names}.", ""]
    if parser.epilog and parser.epilog.strip() != global_epilog.strip():
        lines += ["```text", parser.epilog.strip(), "```", ""]
    for name, help_line, sub in subcommands(parser):
        lines += command_section([*path, name], help_line, sub, global_keys, global_epilog)
    return lines


def render(parser: argparse.ArgumentParser) -> str:
    """The whole reference page for ``parser`` (the ``a2pg`` parser)."""
    epilog = parser.epilog or ""
    global_keys = option_keys(parser)
    lines = [
        "# Command line",
        "",
        "<!-- Generated at build time from a2pg.cli.main.build_parser(): do not edit. -->",
        "",
        *[p for para in paragraphs(parser.description or "") for p in (text(para), "")],
        "```text",
        usage(parser),
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for name, summary, _ in subcommands(parser):
        lines.append(f"| [`{name}`](#{name}) | {text(summary).replace('|', '&#124;')} |")
    lines += ["", "## Global options {#global-options}", ""]
    lines += [
        "Given before the command name; a command that also takes them after its name says so.",
        "",
    ]
    lines += [item(parser, a) for a in parser._actions if documented(a) and a.option_strings]
    lines += ["", "## Exit codes and environment {#exit-codes}", ""]
    lines += ["```text", epilog.strip(), "```", ""]
    for name, summary, sub in subcommands(parser):
        lines += command_section([name], summary, sub, global_keys, epilog)
    return "\n".join(lines).rstrip() + "\n"


def cli_reference() -> str:
    """The page for the installed ``a2pg`` command."""
    from a2pg.cli.main import build_parser

    return render(build_parser())


# -- MkDocs events ---------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    """Adds the generated page to the site's files (so the nav and links can name it)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=cli_reference()))
    return files


def on_serve(server: Any, config: Any, builder: Any) -> Any:
    """``mkdocs serve`` rebuilds when the CLI's code changes, not only the docs."""
    from pathlib import Path

    server.watch(str(Path(config["config_file_path"]).parent / "a2pg" / "cli"))
    return server
