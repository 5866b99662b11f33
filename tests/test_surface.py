"""The tables that list the Store surface, tied to the ``Store`` protocol itself.

``Store`` (``a2pg/store.py``) is the public surface. Each test below fails as soon as one
of the places that must follow it falls behind: the hostile-input suite's operations,
the model test's rules, the checked front and its proxies, and the backends (which
implement hooks, never a public operation). No database is needed.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from hypothesis.stateful import RULE_MARKER

from a2pg.front import CheckedStore, StoreProxy
from a2pg.memory import MemoryStore
from a2pg.postgres import PostgresStore
from a2pg.sqlite import SqliteStore
from a2pg.store import Presence, Store
from a2pg.worker.polling import PollingOnly
from a2pg.worker.results import _Recorder
from tests.conformance.hostile_inputs import OPERATIONS, READ_ONLY
from tests.model import universe
from tests.model.observe import OBSERVED, Folds, observe
from tests.model.rules import NOT_MODELLED, RULES, StoreModel


def protocol_members(protocol: type) -> frozenset[str]:
    """The public members a protocol declares (its methods and properties)."""
    members: Callable[[type], frozenset[str]] | None = getattr(
        typing, "get_protocol_members", None
    )  # Python 3.13 on
    if members is not None:
        return frozenset(name for name in members(protocol) if not name.startswith("_"))
    return frozenset(name for name in vars(protocol) if not name.startswith("_"))


STORE = protocol_members(Store)
"""Store's members: its operations, ``presence``, ``wakeups`` and ``close``."""
SURFACE = (STORE - {"presence"}) | {f"presence.{name}" for name in protocol_members(Presence)}
"""What a caller can call: Store's members, with ``presence`` spelt out as its own."""

NO_INPUT: dict[str, str] = {
    # A refusal is impossible without arguments, and closing would leave every later call
    # of the example refused (the conformance suites test closing).
    "close": "takes no input; ends the store",
    # Its answer is a subscription, not state: nothing for a pair of stores to agree on
    # call by call (tests/conformance/test_wakeups.py).
    "wakeups": "takes no input; a subscription, not state",
}
"""Store members the hostile-input suite does not call, and why. Read-only members
without arguments (``workers``, ``consumer_stats``...) are called anyway: their answers
on the suite's hostile state are compared."""


def public(cls: type) -> frozenset[str]:
    """The public names ``cls`` itself defines (not inherited)."""
    return frozenset(name for name in vars(cls) if not name.startswith("_"))


def parameters(function: Any) -> list[tuple[str, object, object]]:
    """Each parameter's name, kind and default (annotations are text, spelt differently)."""
    if isinstance(function, property):
        return []
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def test_the_protocol_is_read_whole() -> None:
    """The introspection finds the operations (if it found nothing, every test passes)."""
    expected = {"append", "complete_and_claim", "heartbeat", "presence", "close"}
    assert expected <= STORE, (
        f"reading a2pg.store.Store found {sorted(STORE)}, not {sorted(expected - STORE)}: "
        "fix protocol_members in tests/test_surface.py"
    )
    assert {"presence.write", "presence.read"} <= SURFACE, (
        f"reading a2pg.store.Presence found {sorted(SURFACE)}: fix protocol_members"
    )


# -- the hostile-input suite -----------------------------------------------------------------


def test_every_operation_has_hostile_inputs() -> None:
    missing = SURFACE - set(NO_INPUT) - set(OPERATIONS)
    assert not missing, (
        f"Store members with no hostile-input case: {sorted(missing)}. Add a case for each "
        "to OPERATIONS in tests/conformance/hostile_inputs.py (and to READ_ONLY if it writes "
        "nothing); only a member taking no input may go to NO_INPUT in tests/test_surface.py, "
        "with its reason"
    )
    unknown = set(OPERATIONS) - SURFACE
    assert not unknown, (
        f"OPERATIONS in tests/conformance/hostile_inputs.py names {sorted(unknown)}, no "
        "member of Store (or presence.*): rename or remove those cases"
    )
    read_only = READ_ONLY - set(OPERATIONS)
    assert not read_only, (
        f"READ_ONLY in tests/conformance/hostile_inputs.py names {sorted(read_only)}, no "
        "operation of OPERATIONS: remove them"
    )


def test_only_members_without_input_go_uncalled() -> None:
    stale = set(NO_INPUT) - STORE
    assert not stale, f"NO_INPUT in tests/test_surface.py names {sorted(stale)}: no Store member"
    taking = {
        name: [p for p, *_ in parameters(getattr(Store, name))[1:]]
        for name in NO_INPUT
        if name in STORE and parameters(getattr(Store, name))[1:]
    }
    assert not taking, (
        f"{taking} take input: move them from NO_INPUT in tests/test_surface.py to OPERATIONS "
        "in tests/conformance/hostile_inputs.py"
    )


# -- the model test --------------------------------------------------------------------------


def test_every_rule_names_the_member_it_drives() -> None:
    rules = {name for name, f in inspect.getmembers(StoreModel) if hasattr(f, RULE_MARKER)}
    unmapped = rules - set(RULES)
    assert not unmapped, (
        f"rules of StoreModel missing from RULES in tests/model/rules.py: {sorted(unmapped)}: "
        "add each with the Store member it calls (None if it calls none)"
    )
    gone = set(RULES) - rules
    assert not gone, f"RULES in tests/model/rules.py names {sorted(gone)}, no rule of StoreModel"
    unknown = {rule: target for rule, target in RULES.items() if target not in SURFACE | {None}}
    assert not unknown, (
        f"RULES in tests/model/rules.py maps rules to {unknown}: no Store member (or presence.*)"
    )


async def test_observed_names_what_observe_reads() -> None:
    store = MemoryStore()
    try:
        folds = [Folds(universe.SESSIONS[0], universe.REDUCERS[0], (None,))]
        read = {name.split("(")[0] for name in await observe(store, folds)}
    finally:
        await store.close()
    assert read == OBSERVED, (
        f"OBSERVED in tests/model/observe.py says {sorted(OBSERVED)}, observe() reads "
        f"{sorted(read)}: make OBSERVED list exactly what observe() reads"
    )


def test_every_member_is_modelled_or_says_why_not() -> None:
    modelled = {target for target in RULES.values() if target is not None}
    missing = SURFACE - modelled - OBSERVED - set(NOT_MODELLED)
    assert not missing, (
        f"Store members the model test neither drives nor observes: {sorted(missing)}. Add a "
        "@rule to StoreModel in tests/model/rules.py (and its entry in RULES), or read it in "
        "observe() in tests/model/observe.py (and add it to OBSERVED), or say why not in "
        "NOT_MODELLED in tests/model/rules.py"
    )
    stale = set(NOT_MODELLED) - SURFACE
    assert not stale, f"NOT_MODELLED in tests/model/rules.py names {sorted(stale)}: no member"
    covered = set(NOT_MODELLED) & (modelled | OBSERVED)
    assert not covered, (
        f"{sorted(covered)} are modelled or observed now: drop them from NOT_MODELLED in "
        "tests/model/rules.py"
    )


# -- the checked front and its proxies -------------------------------------------------------


def test_the_checked_front_defines_every_member_as_store_declares_it() -> None:
    missing = {name for name in STORE if not hasattr(CheckedStore, name)}
    assert not missing, (
        f"CheckedStore (a2pg/front.py) lacks Store members {sorted(missing)}: add each as a "
        "checked operation calling a new abstract hook"
    )
    extra = {n for n in dir(CheckedStore) if not n.startswith("_")} - STORE
    assert not extra, (
        f"CheckedStore (a2pg/front.py) has public {sorted(extra)}, which Store "
        "(a2pg/store.py) does not declare: add them to the protocol"
    )
    differ = {
        name: (parameters(getattr(Store, name)), parameters(getattr(CheckedStore, name)))
        for name in STORE
        if parameters(getattr(Store, name)) != parameters(getattr(CheckedStore, name))
    }
    assert not differ, (
        f"parameters (Store, CheckedStore) differ: {differ}; make CheckedStore in "
        "a2pg/front.py take what Store in a2pg/store.py declares"
    )


def test_the_proxy_forwards_every_hook() -> None:
    assert not StoreProxy.__abstractmethods__, (
        f"StoreProxy (a2pg/front.py) leaves {sorted(StoreProxy.__abstractmethods__)} abstract: "
        "add each, calling the inner store's"
    )
    hooks = set(CheckedStore.__abstractmethods__)
    unforwarded = hooks - set(vars(StoreProxy))
    assert not unforwarded, (
        f"StoreProxy (a2pg/front.py) does not define {sorted(unforwarded)}: add each, "
        "returning self.inner's"
    )


def test_wrappers_change_only_what_they_wrap() -> None:
    """A wrapper overriding a public operation would hold its own copy of it (and fall
    behind Store); hooks are where wrappers watch calls."""
    assert issubclass(PollingOnly, StoreProxy), (
        "PollingOnly (a2pg/worker/polling.py) must subclass StoreProxy"
    )
    assert public(PollingOnly) == {"wakeups"}, (
        f"PollingOnly (a2pg/worker/polling.py) defines {sorted(public(PollingOnly))}: its only "
        "public override is wakeups; watch other calls in hooks"
    )
    assert issubclass(_Recorder, StoreProxy), (
        "run_until_idle's _Recorder (a2pg/worker/results.py) must subclass StoreProxy"
    )
    overridden = public(_Recorder) & STORE
    assert not overridden, (
        f"_Recorder (a2pg/worker/results.py) overrides Store members {sorted(overridden)}: "
        "override their hooks instead"
    )


# -- the backends ----------------------------------------------------------------------------

BACKEND_EXTRAS: dict[type, frozenset[str]] = {
    MemoryStore: frozenset(),
    PostgresStore: frozenset({"open", "schema", "pool", "append_in", "distributed"}),
    SqliteStore: frozenset({"open", "path", "append_in"}),
}
"""Each backend's public names beyond Store: how it opens, what it runs on, and the append
in the caller's own transaction (its connection type is the backend's)."""
OWN = frozenset({"presence", "close"})
"""The Store members each backend defines itself (abstract in CheckedStore)."""


def test_backends_implement_hooks_not_operations() -> None:
    for cls, extras in BACKEND_EXTRAS.items():
        name = cls.__name__
        assert issubclass(cls, CheckedStore), f"{name} must subclass a2pg.front.CheckedStore"
        assert not cls.__abstractmethods__, (
            f"{name} leaves hooks {sorted(cls.__abstractmethods__)} unimplemented"
        )
        operations = public(cls) & (STORE - OWN)
        assert not operations, (
            f"{name} overrides Store operations {sorted(operations)}: remove them and move "
            "what differs into the hook CheckedStore calls (a2pg/front.py)"
        )
        unexpected = public(cls) - STORE - extras
        assert not unexpected, (
            f"{name} has public {sorted(unexpected)}, neither Store's nor a known extra: add "
            "them to the protocol (a2pg/store.py), make them private, or list them in "
            "BACKEND_EXTRAS in tests/test_surface.py"
        )
