"""Size limits every backend enforces alike; past one, the error names the limit's setting."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits every backend enforces; each error names the field it hit."""

    max_session_id_length: int = 256
    max_id_length: int = 256
    max_type_length: int = 256
    max_name_length: int = 256
    max_payload_bytes: int = 1_048_576
    max_batch_events: int = 1_000
    max_error_length: int = 8_192
    max_json_depth: int = 256


DEFAULT_LIMITS = Limits()
