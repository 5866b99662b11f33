"""Migrations and the layout check on a Citus cluster (``../shared/citus``, tests only)."""
