"""Size limits every backend enforces alike; past one, the error names the limit's setting.

Two kinds of bound live here. ``Limits`` holds the configurable ones, each with a
generous default: what one value, one list and one call may carry, so that no single
call can hold a session lock for long or build an unbounded statement. The module
constants are fixed by the storage itself (PostgreSQL column types, the dates both
PostgreSQL and Python can read back) and are the same for every store.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, datetime

from ..errors import invalid
from .render import show

MAX_INDEX = 2**63 - 1
"""The largest event index, position or bound: indexes are PostgreSQL ``bigint``."""

MAX_ATTEMPT = 2**31 - 1
"""The largest attempt number or failure count: they are PostgreSQL ``integer``."""

EARLIEST_TIME = datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest datetime a caller may pass (presence ``at``)."""

LATEST_TIME = datetime(9000, 1, 1, tzinfo=UTC)
"""Caller datetimes must be before this. Within [EARLIEST_TIME, LATEST_TIME) a timestamp
reads back on PostgreSQL in every session time zone and fits Python's ``datetime``
(years 1..9999): year 1 or 9999 with an offset does not."""

MAX_SECONDS = 100 * 365.25 * 86_400
"""The largest ``Limits.max_seconds`` accepted: a century past the store's clock."""

INDEX_KEY_BUDGET = 2_400
"""Bytes the names of the widest index key may take together. PostgreSQL refuses a btree
row over about 2,704 bytes (8 KiB pages); the rest is kept for tuple and column headers,
alignment and margin. ``Limits`` refuses settings whose widest key would not fit."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits every backend enforces; each error names the field it hit.

    Texts have a limit in characters and one in UTF-8 bytes: the bytes bound the
    PostgreSQL index keys the text is part of (4-byte characters make a 256-character
    name 1 KiB). Per-call limits are checked as the call's arguments are read, so an
    oversized call is refused after reading at most one item past its limit.
    """

    max_session_id_length: int = 256
    """Characters of a session id."""
    max_session_id_bytes: int = 512
    """UTF-8 bytes of a session id: part of every session-scoped index key."""
    max_id_length: int = 256
    """Characters of an event id."""
    max_id_bytes: int = 512
    """UTF-8 bytes of an event id: indexed with the session id."""
    max_type_length: int = 256
    """Characters of an event type (also of each type a read or a log spec names)."""
    max_type_bytes: int = 512
    """UTF-8 bytes of an event type: indexed with the session id."""
    max_name_length: int = 256
    """Characters of a consumer, lane, reducer or holder name and of a presence
    namespace, participant or field."""
    max_name_bytes: int = 512
    """UTF-8 bytes of those names. The widest key (snapshot pins: session, consumer,
    lane, reducer) holds three names and a session id."""
    max_error_length: int = 8_192
    """Characters of a failure's error text kept (longer texts are cut, never refused)."""
    max_json_depth: int = 256
    """Nesting depth of any JSON value (payloads, states, presence values)."""
    max_payload_bytes: int = 1_048_576
    """UTF-8 bytes of one event payload, as compact JSON."""
    max_state_bytes: int = 8_388_608
    """UTF-8 bytes of one snapshot state, as compact JSON."""
    max_presence_value_bytes: int = 65_536
    """UTF-8 bytes of one presence value, and of a write's ``seen``, as compact JSON."""
    max_batch_events: int = 1_000
    """Events of one append, or returned by one completion."""
    max_call_events: int = 10_000
    """Events one call appends in all: a ``complete_attempts`` batch sums its completions."""
    max_call_bytes: int = 16_777_216
    """Bytes one call writes in all: its payloads, states, presence values and the types
    of the log specs it names, summed. Bounds how long one call holds its locks."""
    max_targets: int = 10_000
    """Targets of one call's events, summed: each makes or queues a cursor row."""
    max_completions: int = 10_000
    """Completions of one ``complete_attempts`` call."""
    max_snapshot_writes: int = 1_000
    """Writes of one ``put_snapshots`` call."""
    max_pins: int = 1_000
    """Pins of one ``put_snapshots`` call, summed over its writes."""
    max_presence_fields: int = 1_000
    """Fields of one presence write."""
    max_log_types: int = 1_000
    """Types one log spec takes, or one read filters on."""
    max_consumers: int = 1_000
    """Consumers one call names (served, woken or registered) or unregisters."""
    max_claims: int = 10_000
    """Claims one ``renew_claims`` or ``release_claims`` call names, and heads one claim
    excludes."""
    max_claim_limit: int = 10_000
    """The largest ``limit`` of ``claim_any``: heads one call claims."""
    max_page_size: int = 10_000
    """The largest ``limit`` of ``sessions`` and ``find_dead_letters``: rows one listing
    returns; also the holders one ``forget_workers`` names."""
    max_seconds: float = 315_576_000.0
    """The longest duration (``ttl``, ``retry_after``, presence ``ttl``): 10 years. A lease
    or backoff ending past year 9999 could not be read back."""

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.name == "max_seconds":
                number = isinstance(value, int | float) and not isinstance(value, bool)
                if not (number and 0 < value <= MAX_SECONDS):  # NaN fails too
                    raise invalid(
                        f"Limits.max_seconds must be above 0 and at most {MAX_SECONDS}, "
                        f"got {show(value)}"
                    )
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise invalid(f"Limits.{spec.name} must be a positive int, got {show(value)}")
        if self.widest_key_bytes > INDEX_KEY_BUDGET:
            raise invalid(
                f"Limits allow index keys of {self.widest_key_bytes} bytes, over the "
                f"{INDEX_KEY_BUDGET} bytes PostgreSQL's btree rows leave them: lower "
                "max_session_id_bytes, max_name_bytes, max_id_bytes or max_type_bytes"
            )

    @property
    def widest_key_bytes(self) -> int:
        """Bytes of names in the widest index key these limits allow (see the layout's
        indexes: snapshot pins hold a session id, a consumer, ``'L' || lane`` and a
        reducer; events a session id with an id or a type; presence three names). A text
        takes at most 4 bytes a character, so the tighter of its two limits counts."""
        session = min(self.max_session_id_bytes, 4 * self.max_session_id_length)
        name = min(self.max_name_bytes, 4 * self.max_name_length)
        event_id = min(self.max_id_bytes, 4 * self.max_id_length)
        event_type = min(self.max_type_bytes, 4 * self.max_type_length)
        return max(session + 3 * name + 1, session + event_id, session + event_type, 3 * name)


DEFAULT_LIMITS = Limits()
