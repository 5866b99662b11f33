"""A griffe extension: the reST habits of a2pg's docstrings, read as Markdown.

The docstrings write ``:meth:`open``` and end a paragraph before a code block with
``::``, as Sphinx would have them. Markdown has neither: a role becomes inline code
(not a link, which would fail the strict build wherever its target is not rendered),
and a ``::`` ending becomes ``:`` (the indented block after it is already a code block).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj):`~?([^`]+)`")
LITERAL_BLOCK = re.compile(r"::$", re.MULTILINE)


def as_markdown(text: str) -> str:
    """``text`` with reST roles as inline code and ``::`` paragraph endings as ``:``."""
    return LITERAL_BLOCK.sub(":", ROLE.sub(r"`\1`", text))


class RestRoles(griffe.Extension):
    """Rewrites every docstring once the package is loaded."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = as_markdown(obj.docstring.value)
