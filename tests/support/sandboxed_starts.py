"""One actor started in a real bubblewrap sandbox on a fresh endpoint, without a run or a
simulator: the launcher (an 8 MiB scratch quota), the start, the wait for its end (30 s
at most), and its stop, with nothing of its sandbox user left behind."""

from __future__ import annotations

import time
from pathlib import Path

from mailroom.mailbox.endpoint import Endpoint, create_endpoint
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import ProcessLauncher, process_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.outer_identity import leftover_processes
from mailroom.orchestrator.records.layout import AttemptPaths


def sandbox_launcher(
    command: list[str], mailbox_root: Path, tmp_path: Path, **confinement: object
) -> ProcessLauncher:
    """A sandbox's launcher for `command` (`confinement`: settings beside the mode), its
    run directory `tmp_path/run`."""
    return process_launcher(
        command,
        ActorLimits(scratch_quota_mb=8),
        confinement=ConfinementSettings.model_validate({"mode": "sandbox", **confinement}),
        run_dir=tmp_path / "run",
        mailbox_root=mailbox_root,
    )


def run_once_in_sandbox(
    launcher: ProcessLauncher, mailbox_root: Path, tmp_path: Path
) -> tuple[Endpoint, dict[str, object], dict[str, object], Path]:
    """Start one actor on a fresh endpoint, wait for it, stop it: the endpoint, the
    actor's description, its stop's details, and the folder of its kept output
    (`tmp_path/evidence`)."""
    identity = launcher.identity()
    endpoint = create_endpoint(mailbox_root, actor_gid=identity.gid)
    out = tmp_path / "evidence"
    out.mkdir(exist_ok=True)
    actor = launcher.start(endpoint, "the instructions\n", identity, AttemptPaths(out).actor_output)
    deadline = time.monotonic() + 30
    while actor.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    described = actor.description()
    actor.stop()
    details = actor.stop_details()
    if identity.uid is not None:
        assert leftover_processes(identity.uid) == []
    return endpoint, described, details, out
