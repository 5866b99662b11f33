"""Model-based tests: random operation sequences on MemoryStore and PostgreSQL, compared."""
