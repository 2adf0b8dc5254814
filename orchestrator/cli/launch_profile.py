"""The method profile a launch runs: loaded with the model declared, its own actor
command, the environment it requires; and, for a resume, the one its run recorded."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
from mailroom.orchestrator.actors.profiles import (
    LoadedProfile,
    MethodProfile,
    ProfileError,
    load_profile,
    shipped_agents,
)
from mailroom.orchestrator.cli.launch_preflight import LaunchRefused


def load_profile_option(
    reference: str, model: str | None = None, *, model_passed: bool = True
) -> LoadedProfile:
    """`--profile` (a shipped agent's name, agents/<name>/, or a path) with `--model` declared."""
    try:
        loaded = load_profile(reference)
        profile = loaded.profile.with_model(model, passed=model_passed)
        return LoadedProfile(profile, loaded.directory)
    except ProfileError as exc:
        raise click.UsageError(str(exc)) from exc


def profile_actor_command(loaded: LoadedProfile, model: str | None) -> list[str] | None:
    """The profile's own actor command (None: it has none), `{profile_dir}` filled in and
    the model's arguments appended when a model is named."""
    declared = loaded.profile.actor
    if declared is None:
        if model is not None:
            raise click.UsageError(
                f"--model: the profile {loaded.name!r} starts no actor of its own; name the "
                "model in --actor, or hand it to the actor you start"
            )
        return None
    extra: list[str] = []
    if model is not None:
        if not declared.model_arguments:
            raise click.UsageError(
                f"--model: the profile {loaded.name!r} declares no way to pass a model to "
                "its actor (actor.model_arguments)"
            )
        extra = [a.replace("{model}", model) for a in declared.model_arguments]
    folder = str(loaded.directory)
    return [a.replace("{profile_dir}", folder) for a in declared.command] + extra


def refuse_unset_environment(loaded: LoadedProfile, spawns_actors: bool) -> None:
    """The profile's required pass-through variables must be set (exit 2, names only)."""
    if not spawns_actors:
        return
    unset = loaded.profile.confinement.unset_required(os.environ)
    provider = loaded.profile.provider
    gated = loaded.profile.uses_gateway and provider is not None
    if gated and provider is not None and not os.environ.get(provider.key_variable):
        raise LaunchRefused(
            f"the profile {loaded.name!r} reaches its provider through the gateway, "
            f"which reads the key from {provider.key_variable}: set it in launch's "
            "environment (the gateway keeps it; it never enters a sandbox or a record)"
        )
    if unset:
        raise LaunchRefused(
            f"the profile {loaded.name!r} passes {', '.join(unset)} to its actor, and "
            f"{'it is' if len(unset) == 1 else 'they are'} not set here: set "
            f"{'it' if len(unset) == 1 else 'them'} in launch's environment (the value "
            "is passed to the actor and never written anywhere)"
        )


def recorded_profile(manifest: dict[str, Any], folder: Path | None) -> LoadedProfile:
    """The profile a run was launched with, as its manifest recorded it (a resume runs
    the same method), and the folder its programs come from."""
    section = manifest["profile"]
    if folder is None or not folder.is_dir():
        # Gone (a run made before the agents moved to agents/, or on another machine):
        # the shipped agent of that name, whose programs the manifest check compares.
        shipped = shipped_agents().get(str(section["name"]))
        folder = shipped if shipped is not None else folder or Path(str(section["name"]))
    try:
        profile = MethodProfile.model_validate(section["declaration"])
    except ValueError:
        # A declaration this version cannot read: the profile as it is now, which the
        # manifest check then refuses if it differs from the recorded one.
        return load_profile_option(str(folder))
    return LoadedProfile(profile, folder)
