"""SQLite backend tests: layout and migrations, processes sharing one file, statements."""
