"""The backend-agnostic conformance suite: one set of tests, every Store backend."""
