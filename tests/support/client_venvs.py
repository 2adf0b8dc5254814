"""The venvs of the exports' real clients (`make clients`, which `make test` builds):
LeRobot's dataset loader and inspect_scout's ATIF import, each in `.venv/clients/<name>`
because its pins clash with mailroom's. A test runs a client's script there, on files
of its own, with a home and caches of its own. A missing venv fails the test, naming the
make target: no test is skipped for it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from locked_packages import read_lock
from packaging.utils import canonicalize_name

CLIENTS = REPO / ".venv" / "clients"
SCRIPTS = Path(__file__).parent / "clients"


def client_program(name: str, program: str = "python") -> Path:
    """`program` of the client's venv (its Python, or a command it installed)."""
    path = CLIENTS / name / "bin" / program
    if not path.exists():
        pytest.fail(f"the {name} client's venv has no {program} ({path.parent}): make clients")
    return path


def client_env(scratch: Path) -> dict[str, str]:
    """A client's environment: offline, its home and caches in `scratch`."""
    home = scratch / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "HF_HOME": str(home / "hf"),
        "HF_HUB_OFFLINE": "1",  # a complete local dataset never reaches the Hub
        "PYTHONNOUSERSITE": "1",
    }


def installed_versions(name: str) -> dict[str, str]:
    """The client venv's installed distributions, by canonical name."""
    found = subprocess.run(
        [str(client_program(name)), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr
    return {canonicalize_name(p["name"]): p["version"] for p in json.loads(found.stdout)}


def assert_installed_as_locked(name: str, locks: tuple[Path, ...]) -> None:
    """The client venv holds exactly what `locks` pin (and the installer the venv was
    seeded with, where the locks leave it out)."""
    locked = {n: str(e.version) for n, e in read_lock(*locks).items()}
    installed = installed_versions(name)
    seeded = {n: v for n, v in installed.items() if n in ("pip", "setuptools") and n not in locked}
    assert {n: v for n, v in installed.items() if n not in seeded} == locked


def run_client(name: str, script: str, scratch: Path, *args: str) -> None:
    """Run `clients/<script>` with `args` in the client's venv (`client_env(scratch)`);
    fails the test with its stderr when it fails."""
    ran = subprocess.run(
        [str(client_program(name)), str(SCRIPTS / script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=client_env(scratch),
    )
    assert ran.returncode == 0, f"{name} failed on {args}:\n{ran.stderr[-4000:]}"
