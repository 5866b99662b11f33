"""a2pg test suites."""
