"""Worker runtime tests: on MemoryStore, and on PostgreSQL when selected."""
