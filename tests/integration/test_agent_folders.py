"""Agents as plug-in folders: each `agents/<name>/` holds its profile, install spec,
wrappers and trace parser; the core finds them through the package's resources and
registries and names no CLI; the agent CLIs install from every folder's spec through
one lockfile; a built wheel carries the folders and finds its profiles."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO
from mailroom.orchestrator.actors.agent_installation import (
    INSTALLATION,
    InstallError,
    install_specs,
    installed_versions,
    package_json_problem,
    wanted_package_json,
)
from mailroom.orchestrator.actors.profiles import (
    MethodProfile,
    registered_trace_formats,
    shipped_agents,
)
from pydantic import ValidationError

CLI_NAMES = re.compile(r"claude|codex|gemini|anthropic|openai", re.IGNORECASE)


def _write_spec(folder: Path, document: object) -> Path:
    folder.mkdir(parents=True)
    (folder / "install.json").write_text(json.dumps(document))
    return folder


def test_the_lockfile_installs_exactly_what_the_agent_folders_declare() -> None:
    specs = install_specs()
    assert {"claude_code", "codex_cli"} <= set(specs)
    assert package_json_problem(INSTALLATION, specs) is None
    lock = json.loads((INSTALLATION / "package-lock.json").read_text("utf-8"))
    wanted = wanted_package_json(specs)["dependencies"]
    assert lock["packages"][""]["dependencies"] == wanted
    for package, version in wanted.items():
        assert lock["packages"][f"node_modules/{package}"]["version"] == version
    assert installed_versions() == {f"npm:{p}": v for p, v in wanted.items()}


def test_a_package_json_asking_for_something_else_is_refused(tmp_path: Path) -> None:
    specs = install_specs()
    (tmp_path / "package.json").write_text(json.dumps({"dependencies": {"left-pad": "1.3.0"}}))
    problem = package_json_problem(tmp_path, specs)
    assert problem is not None and "left-pad" in problem and "--package-lock-only" in problem
    assert "cannot be read" in (package_json_problem(tmp_path / "none", specs) or "")


def test_two_agents_wanting_two_versions_of_one_package_are_refused(tmp_path: Path) -> None:
    one = _write_spec(
        tmp_path / "one", {"npm": {"package": "x", "version": "1.0.0"}, "check": ["x"]}
    )
    two = _write_spec(
        tmp_path / "two", {"npm": {"package": "x", "version": "2.0.0"}, "check": ["x"]}
    )
    specs = install_specs({"one": one, "two": two})
    with pytest.raises(InstallError, match="one installation holds one version"):
        wanted_package_json(specs)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"npm": {"package": "x", "version": "^1.0.0"}, "check": ["x"]}, "version"),
        ({"npm": {"package": "../x", "version": "1.0.0"}, "check": ["x"]}, "package"),
        ({"npm": {"package": "x", "version": "1.0.0"}, "check": []}, "check"),
        ({"npm": {"package": "x", "version": "1.0.0"}, "check": ["x"], "postinstall": 1}, "extra"),
    ],
)
def test_an_install_spec_is_typed(tmp_path: Path, document: object, message: str) -> None:
    folder = _write_spec(tmp_path / "agent", document)
    with pytest.raises(InstallError, match=rf"(?s){folder / 'install.json'}.*{message}"):
        install_specs({"agent": folder})


def test_a_trace_format_no_agent_registers_is_refused() -> None:
    assert {"claude_stream_json", "codex_json"} <= set(registered_trace_formats())
    with pytest.raises(ValidationError, match="no agent registers the trace format 'nope'"):
        MethodProfile.model_validate(
            {"profile": "p", "method_family": "f", "actor": {"command": ["x"], "trace": "nope"}}
        )


def test_every_shipped_trace_and_installation_belongs_to_an_agent_folder() -> None:
    for name, folder in shipped_agents().items():
        profile = MethodProfile.model_validate_json((folder / "profile.json").read_text("utf-8"))
        actor = profile.actor
        if actor is not None and actor.installation is not None:
            assert (folder / "install.json").is_file(), name
        if actor is not None and actor.trace is not None:
            assert (folder / "trace.py").is_file(), name


def test_the_core_and_the_makefile_name_no_agent_cli() -> None:
    """Adding an agent touches its folder, pyproject's registry and the lockfile only."""
    places = [
        REPO / "Makefile",
        REPO / "orchestrator" / "actors" / "profiles.py",
        REPO / "orchestrator" / "actors" / "agent_installation.py",
        *sorted((REPO / "orchestrator" / "viewer").glob("*.py")),
    ]
    for place in places:
        named = sorted({m.group(0).lower() for m in CLI_NAMES.finditer(place.read_text())})
        assert not named, f"{place.relative_to(REPO)} names {named}"


def test_a_built_wheel_carries_the_agent_folders_and_finds_its_profiles(tmp_path: Path) -> None:
    # Built as `pip install` builds the editable install: in an isolated environment
    # with pyproject's build requirements, from the package index.
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(tmp_path / "dist"), str(REPO)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("mailroom-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    for name, folder in shipped_agents().items():
        for file in folder.rglob("*"):
            if file.is_file() and "__pycache__" not in file.parts:
                inside = f"mailroom/agents/{name}/{file.relative_to(folder).as_posix()}"
                assert inside in names, f"the wheel lacks {inside}"
    probe = (
        "import json; from mailroom.orchestrator.actors.profiles import load_profile, "
        "shipped_agents; found = shipped_agents(); "
        "print(json.dumps({n: str(p) for n, p in found.items()})); "
        "print(load_profile('codex_cli').profile.actor.trace)"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    found_line, trace = ran.stdout.splitlines()[-2:]
    found = json.loads(found_line)
    assert sorted(found) == sorted(shipped_agents())
    site = str((tmp_path / "site" / "mailroom" / "agents").resolve())
    assert all(path.startswith(site) for path in found.values()), found
    assert trace == "codex_json"
