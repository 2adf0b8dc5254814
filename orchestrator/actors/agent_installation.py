"""The agent CLIs the project installs: each agent folder's `install.json`, one lockfile.

An agent folder whose actor is a CLI from npm declares it beside its profile:

    {"npm": {"package": "@example/agent-cli", "version": "1.2.3"},
     "after_install": [["node", "node_modules/@example/agent-cli/install.cjs"]],
     "check": ["agent-cli", "--version"]}

All of them are installed together into `agent_clis/` (the `installation: "agent_clis"`
of a profile), pinned with their hashes by one npm lockfile, `agent_clis/package-lock.json`.
`make agent-clis` runs this module: it refuses a `package.json` that asks for other
packages than the folders declare (`write` makes it anew; `npm install
--package-lock-only` then moves the lock), runs `npm ci` without install scripts, each
folder's `after_install` steps (run from the installation folder, as themselves), and
each `check` from the installed programs with a throw-away home (agent CLIs keep state
there), which proves the CLI starts. Nothing here names a CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from mailroom.checkout import CHECKOUT
from mailroom.orchestrator.actors.profiles import shipped_agents
from pydantic import BaseModel, ConfigDict, Field, ValidationError

INSTALL_FILE = "install.json"
# Where `make agent-clis` installs, in the checkout: a wheel ships no agent CLI.
INSTALLATION = CHECKOUT / "agent_clis"
AGENT_CLI_FOLDER = INSTALLATION / "node_modules"
PACKAGE_JSON = {
    "name": "mailroom-agent-clis",
    "version": "0.0.0",
    "private": True,
    "description": "The agent CLIs mailroom runs as confined actors, pinned (installed by "
    "make into node_modules/ from each agent folder's install.json).",
    "license": "UNLICENSED",
}
NPM_NAME = r"^(@[a-z0-9][a-z0-9._-]{0,99}/)?[a-z0-9][a-z0-9._-]{0,99}$"
EXACT_VERSION = r"^\d{1,9}\.\d{1,9}\.\d{1,9}(-[0-9A-Za-z.-]{1,64})?$"
Argument = Annotated[str, Field(min_length=1, max_length=4096)]


class InstallError(Exception):
    """An install spec refused, or an installation that does not agree with the specs."""


class NpmPackage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    package: Annotated[str, Field(pattern=NPM_NAME)]
    version: Annotated[str, Field(pattern=EXACT_VERSION)]


class InstallSpec(BaseModel):
    """`install.json`: the npm package at one exact version, the steps npm's skipped
    install scripts would have done, and the command that proves the CLI starts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    npm: NpmPackage
    after_install: list[Annotated[list[Argument], Field(min_length=1)]] = Field(
        default_factory=list
    )
    check: Annotated[list[Argument], Field(min_length=1)]


def install_specs(agents: Mapping[str, Path] | None = None) -> dict[str, InstallSpec]:
    """Each agent folder's install spec, by agent name (folders without one: none)."""
    specs: dict[str, InstallSpec] = {}
    for name, folder in (shipped_agents() if agents is None else agents).items():
        path = folder / INSTALL_FILE
        if not path.is_file():
            continue
        try:
            specs[name] = InstallSpec.model_validate_json(path.read_bytes())
        except (OSError, ValidationError) as exc:
            raise InstallError(f"the install spec {path} is refused: {exc}") from exc
    return specs


def wanted_package_json(specs: Mapping[str, InstallSpec]) -> dict[str, Any]:
    """The installation's `package.json` for these specs (one version of each package)."""
    dependencies: dict[str, str] = {}
    for name, spec in sorted(specs.items()):
        held = dependencies.setdefault(spec.npm.package, spec.npm.version)
        if held != spec.npm.version:
            raise InstallError(
                f"{name} wants {spec.npm.package} {spec.npm.version}, another agent {held}: "
                "one installation holds one version of each package"
            )
    return {**PACKAGE_JSON, "dependencies": dict(sorted(dependencies.items()))}


def package_json_problem(folder: Path, specs: Mapping[str, InstallSpec]) -> str | None:
    """Why `folder/package.json` does not ask for exactly what the specs declare, or None."""
    wanted = wanted_package_json(specs)["dependencies"]
    try:
        held = json.loads((folder / "package.json").read_text("utf-8")).get("dependencies")
    except (OSError, ValueError, AttributeError) as exc:
        return f"{folder / 'package.json'} cannot be read: {exc}"
    if held != wanted:
        return (
            f"{folder / 'package.json'} asks for {held}, the agent folders declare {wanted}: "
            f"run `python -m {__spec__.name} write` then `npm install --package-lock-only "
            "--ignore-scripts` in that folder"
        )
    return None


def installed_versions(folder: Path = AGENT_CLI_FOLDER) -> dict[str, str | None]:
    """The installed version of each package the installation asks for (`npm:NAME`;
    None where it is not installed), as a manifest records them."""
    try:
        wanted = json.loads((folder.parent / "package.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    versions: dict[str, str | None] = {}
    for name in sorted(wanted.get("dependencies", {})):
        try:
            installed = json.loads((folder / name / "package.json").read_text("utf-8"))
            versions[f"npm:{name}"] = str(installed["version"])
        except (OSError, ValueError, KeyError, TypeError):
            versions[f"npm:{name}"] = None
    return versions


def installation_difference(
    recorded: Mapping[str, str | None], folder: Path = AGENT_CLI_FOLDER
) -> str | None:
    """How the installation on this machine differs from the versions a run recorded
    (`installed_versions` on the machine that launched it); None when it holds each."""
    here = installed_versions(folder)
    differ = [
        f"{name} {here.get(name) or 'missing'} here, {version} in the run's manifest"
        for name, version in sorted(recorded.items())
        if here.get(name) != version
    ]
    if not differ:
        return None
    return f"the agent CLI installation at {folder} is not the run's: " + "; ".join(differ)


def _run(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> None:
    print("+", " ".join(argv), flush=True)
    done = subprocess.run(list(argv), cwd=cwd, env=None if env is None else dict(env))
    if done.returncode != 0:
        raise InstallError(f"{' '.join(argv)} exited with {done.returncode}")


def install(folder: Path = INSTALLATION) -> None:
    """Install every spec's package from the lockfile, finish and check each CLI."""
    specs = install_specs()
    problem = package_json_problem(folder, specs)
    if problem is not None:
        raise InstallError(problem)
    _run(
        ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder
    )
    for spec in specs.values():
        for step in spec.after_install:
            _run(step, cwd=folder)
    programs = folder / "node_modules" / ".bin"
    for name, spec in specs.items():
        with tempfile.TemporaryDirectory(prefix=f"mailroom-check-{name}-") as home:
            env = {**os.environ, "HOME": home, "PATH": f"{programs}:{os.environ.get('PATH', '')}"}
            try:
                _run(spec.check, cwd=Path(home), env=env)
            except InstallError as exc:
                raise InstallError(f"{name}'s CLI does not start: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """`install` (make agent-clis), `check` (package.json agrees), `write` (makes it)."""
    command = (list(sys.argv[1:]) if argv is None else list(argv)) or ["check"]
    try:
        if command == ["install"]:
            install()
        elif command == ["check"]:
            problem = package_json_problem(INSTALLATION, install_specs())
            if problem is not None:
                raise InstallError(problem)
        elif command == ["write"]:
            document = wanted_package_json(install_specs())
            text = json.dumps(document, indent=2) + "\n"
            (INSTALLATION / "package.json").write_text(text, "utf-8")
        else:
            print("usage: agent_installation [install | check | write]", file=sys.stderr)
            return 2
    except InstallError as exc:
        print(f"agent CLIs: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
