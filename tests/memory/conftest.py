"""MemoryStore's own tests take ``store`` to mean the plugin's lone MemoryStore."""

from __future__ import annotations

import pytest

from a2pg.memory import MemoryStore


@pytest.fixture
def store(memory: MemoryStore) -> MemoryStore:
    return memory
