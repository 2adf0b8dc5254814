"""Whether a sandbox can start on this machine: bubblewrap found, its system-call filter
built, and a trial sandbox started and ended as an episode's would be.

A launch and a cluster worker ask before anything is created; the trial runs once per
process (as root: as a fresh outer identity, swept after).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from mailroom.orchestrator.actors.actor_program import SAFE_PATH
from mailroom.orchestrator.actors.confinement import ConfinementError
from mailroom.orchestrator.actors.outer_identity import OuterIdentity, kill_leftovers
from mailroom.orchestrator.actors.sandbox import (
    INSIDE_GID,
    INSIDE_UID,
    SandboxTool,
    system_view,
)
from mailroom.orchestrator.actors.seccomp import SeccompUnavailableError, filter_program


class SandboxUnavailableError(ConfinementError):
    """The sandbox cannot start on this machine (no bubblewrap, no user namespaces)."""


def find_tool() -> SandboxTool:
    """bubblewrap on the system PATH, or why not."""
    path = shutil.which("bwrap", path=SAFE_PATH + ":/usr/local/sbin:/usr/sbin:/sbin")
    if path is None:
        raise SandboxUnavailableError(
            "bubblewrap (bwrap) is not installed: install the Debian package 'bubblewrap' "
            "(make does it), or pass --confinement none to run actors unconfined"
        )
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailableError(f"{path} --version failed: {exc}") from exc
    version = out.stdout.strip().removeprefix("bubblewrap ").strip() or "unknown"
    return SandboxTool(path, version)


@functools.cache
def _probe(tool_path: str, as_root: bool) -> str | None:
    """Run `true` in a minimal sandbox, as an episode would; None, or why it failed."""
    identity = OuterIdentity.fresh() if as_root else OuterIdentity(None, None)
    argv = [
        tool_path,
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--new-session",
        "--disable-userns",
        "--uid",
        str(INSIDE_UID),
        "--gid",
        str(INSIDE_GID),
        *system_view(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        "/bin/true",
    ]
    try:
        out = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=30,
            user=identity.uid,
            group=identity.gid,
            extra_groups=[] if identity.uid is not None else None,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:
        if identity.uid is not None:
            kill_leftovers(identity.uid)
        identity.release()
    if out.returncode != 0:
        return (out.stderr.strip() or f"exit status {out.returncode}")[:500]
    return None


def probe_sandbox() -> SandboxTool:
    """The tool, once a trial sandbox has started and ended; else `SandboxUnavailableError`."""
    tool = find_tool()
    try:
        filter_program()
    except SeccompUnavailableError as exc:
        raise SandboxUnavailableError(
            f"the sandbox's system-call filter cannot be built: {exc}; pass --confinement "
            "none to run actors unconfined"
        ) from exc
    problem = _probe(tool.path, os.geteuid() == 0)
    if problem is not None:
        raise SandboxUnavailableError(
            f"a bubblewrap sandbox cannot start here ({problem}): user namespaces may be "
            "disabled; pass --confinement none to run actors unconfined"
        )
    return tool
