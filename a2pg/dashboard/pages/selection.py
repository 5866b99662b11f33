"""Rows picked by hand: the selection form's keys, and the confirmation of a bulk action
on them.

The selection component is the ``selection_form`` / ``select_box`` / ``select_all``
macros (templates/macros.html) and ``selected_keys`` here: a POST form (CSRF-checked
like every POST) whose rows' checkboxes carry ``HeadKey`` values. Its target lists what
was picked, as the store has it now, and asks to confirm; only that page's button acts,
on exactly the heads it listed. Dead letters use it for retry and skip
(``confirm_selected``, then ``/redrive/many``); another action on heads (cancelling
live ones, say) needs only its own confirmation route over ``selected_keys`` and its
own final POST.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from ...models import Head
from ...store import Store
from ..params import bad_request, local_path, text
from ..state import BULK_LIMIT
from .actions import HeadKey, action_of, checked_form

KEY_FIELD = "key"


def selected_keys(form: FormData, *, limit: int | None = None) -> list[HeadKey]:
    """The distinct heads a selection form names, in its order: a 400 when none, more
    than ``limit`` (default ``BULK_LIMIT``), or a malformed one."""
    limit = BULK_LIMIT if limit is None else limit
    values = form.getlist(KEY_FIELD)
    if not values:
        raise bad_request("nothing was selected: tick the rows to act on first")
    if len(values) > limit:
        raise bad_request(f"at most {limit} rows at once")
    return list(dict.fromkeys(HeadKey.decode(value) for value in values))


async def dead_letters_among(store: Store, keys: Sequence[HeadKey]) -> tuple[list[Head], int]:
    """Which of ``keys`` are dead letters now (one ``dead_letters`` read per session), in
    the keys' order, and how many are not (redriven, skipped or cleared since the page
    was shown)."""
    by_session: dict[str, dict[HeadKey, Head]] = {}
    for key in keys:
        if key.session_id not in by_session:
            heads = await store.dead_letters(key.session_id)
            by_session[key.session_id] = {_key_of(h): h for h in heads}
    found = [h for key in keys if (h := by_session[key.session_id].get(key)) is not None]
    return found, len(keys) - len(found)


def _key_of(head: Head) -> HeadKey:
    return HeadKey(head.session_id, head.consumer, head.lane, head.index)


def encode(head: Head) -> str:
    return _key_of(head).encode()


async def confirm_selected(request: Request) -> Response:
    """``POST /dead-letters/confirm`` (the selection form: ``key``..., ``action``,
    ``next``): the picked dead letters that still are, and the button that redrives
    exactly them (``/redrive/many``)."""
    dash, form = await checked_form(request)
    action = action_of(form)
    keys = selected_keys(form)
    heads, gone = await dead_letters_among(dash.store, keys)
    back = local_path(text(form, "next"), "/dead-letters")
    return dash.pages.render(
        request,
        "confirm.html",
        heads=heads,
        gone=gone,
        more=False,
        action=action,
        back=back,
        limit=BULK_LIMIT,
        key=encode,
    )
