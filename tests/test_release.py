"""What a release carries besides the code: complete metadata, one base URL for every link,
a changelog, and the lowest supported versions pinned for CI.

The README is the package index's page too, where a relative link leads nowhere: every
link in it is absolute, under the repository's URL (``project.urls.Homepage``), and
names a file the repository has, so it works on either page.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import a2pg

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT: dict[str, Any] = PYPROJECT["project"]
BASE = PROJECT["urls"]["Homepage"]
LINK = re.compile(r"\]\(([^)\s]+)\)")
PYTHONS = ("3.11", "3.12", "3.13")
"""The versions CI installs the wheel on (.ci/run)."""
USER_EXTRAS = ("embedded", "metrics", "otel", "dashboard", "bench")
"""The extras a user installs; ``docs`` and ``dev`` are the contributors'."""


def test_the_classifiers_name_the_tested_pythons_asyncio_the_license_and_typing() -> None:
    classifiers = set(PROJECT["classifiers"])
    for version in PYTHONS:
        assert f"Programming Language :: Python :: {version}" in classifiers
    listed = sorted(
        c.rsplit(" :: ", 1)[1]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    )
    assert listed == list(PYTHONS)
    assert PROJECT["requires-python"] == f">={PYTHONS[0]}"
    assert {
        "Framework :: AsyncIO",
        "License :: OSI Approved :: MIT License",
        "Typing :: Typed",
    } <= classifiers
    assert PROJECT["license"] == {"text": "MIT"}


def test_the_project_urls_share_one_base() -> None:
    urls: dict[str, str] = PROJECT["urls"]
    assert set(urls) == {"Homepage", "Documentation", "Changelog", "Issues"}
    assert BASE.startswith("https://") and not BASE.endswith("/")
    for url in urls.values():
        assert url == BASE or url.startswith(BASE + "/"), url
    assert urls["Documentation"] == f"{BASE}/blob/main/docs/index.md"
    assert urls["Changelog"] == f"{BASE}/blob/main/CHANGELOG.md"


def repository_file(url: str) -> Path:
    """The file of the repository a link under the base URL names (anchor dropped)."""
    for kind in ("blob", "raw"):
        prefix = f"{BASE}/{kind}/main/"
        if url.startswith(prefix):
            return ROOT / url.removeprefix(prefix).split("#", 1)[0]
    raise AssertionError(f"not a file of the repository: {url}")


def test_every_readme_link_is_absolute_and_names_a_file_the_repository_has() -> None:
    links = LINK.findall((ROOT / "README.md").read_text())
    assert len(links) >= 10
    for url in links:
        if url.startswith(("http://127.0.0.1", "http://localhost")):
            continue
        assert url.startswith(BASE + "/"), f"a link that breaks on the index page: {url}"
        assert repository_file(url).is_file(), url
    images = [url for url in links if url.endswith(".png")]
    assert images and all(url.startswith(f"{BASE}/raw/main/") for url in images)


def test_the_documentation_and_changelog_urls_name_files_the_repository_has() -> None:
    for key in ("Documentation", "Changelog"):
        assert repository_file(PROJECT["urls"][key]).is_file()


def test_the_changelog_keeps_a_changelog_and_has_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    assert "Keep a Changelog" in text
    versions = re.findall(r"^## \[([^\]]+)\]", text, re.MULTILINE)
    assert versions[0] == "Unreleased"
    assert PROJECT["version"] in versions
    for version in versions:
        assert re.search(rf"^\[{re.escape(version)}\]: {re.escape(BASE)}/", text, re.MULTILINE)


def test_the_installed_package_is_typed_and_says_where_it_lives() -> None:
    """Against the wheel in .ci/run's wheel runs; against the checkout elsewhere."""
    assert (Path(a2pg.__file__).parent / "py.typed").is_file()
    meta = metadata.metadata("a2pg")
    urls = {
        entry.split(", ", 1)[0]: entry.split(", ", 1)[1]
        for entry in meta.get_all("Project-URL") or []
    }
    # An editable install's metadata is as old as its last `pip install -e`.
    if urls:
        assert urls == PROJECT["urls"]
        assert set(meta.get_all("Classifier") or []) == set(PROJECT["classifiers"])


def declared() -> dict[str, Requirement]:
    """Every requirement a user may install: the dependencies and the user extras."""
    requirements = [Requirement(text) for text in PROJECT["dependencies"]]
    for extra in USER_EXTRAS:
        requirements += [Requirement(text) for text in PROJECT["optional-dependencies"][extra]]
    return {requirement.name.lower(): requirement for requirement in requirements}


def lowest_pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / ".ci" / "lowest.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower()] = Version(version)
    return pins


def minimum(requirement: Requirement) -> Version:
    [floor] = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    return floor


@pytest.mark.parametrize("name", sorted(declared()))
def test_lowest_pins_every_declared_dependency_at_its_minimum(name: str) -> None:
    requirement, pins = declared()[name], lowest_pins()
    assert pins[name] == minimum(requirement), f"{name}: .ci/lowest.txt and pyproject.toml"
    for extra in requirement.extras:  # psycopg[binary]: psycopg-binary at the same version
        assert pins[f"{name}-{extra}"] == minimum(requirement)


def test_lowest_pins_nothing_undeclared_but_the_sdk_beside_its_api() -> None:
    named = set(declared()) | {f"{n}-{e}" for n, r in declared().items() for e in r.extras}
    assert set(lowest_pins()) - named == {"opentelemetry-sdk"}
    assert lowest_pins()["opentelemetry-sdk"] == lowest_pins()["opentelemetry-api"]
