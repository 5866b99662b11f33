-- What the watcher of streams and wakeups reads (a2pg/sqlite/streams.py).
-- Conventions: README.md beside this file.

-- name: data_version
-- A number that changes whenever another connection commits to the file: the cheap
-- signal the watcher polls. It reads no table.
pragma data_version;
