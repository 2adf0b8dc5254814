"""A worker's private staging run directory on its node, apart from any mailbox root.

Episodes write their evidence here as they would into a local run directory; each
finished attempt is sent to the driver and removed. The folder is owner-only and held
under a lock while its worker lives, so a worker that starts on the node later removes
the folders of workers that died (a killed driver takes its workers with it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

from mailroom.orchestrator.records.layout import RunPaths
from mailroom.orchestrator.records.private import PRIVATE_DIR_MODE, make_private_dir

LOCK_NAME = ".lock"


def staging_base() -> Path:
    """Where this user's workers stage evidence on this node: the system's temporary
    folder, which an actor's sandbox replaces by a tmpfs of its own."""
    return Path(tempfile.gettempdir()) / f"mailroom-staging-{os.getuid()}"


class StagingError(OSError):
    """The staging folder is not this user's own."""


class StagingArea:
    """One worker's staging folder (`run_dir` is what its episodes use as run directory)."""

    def __init__(self, base: Path | None = None) -> None:
        base = base or staging_base()
        make_private_dir(base)
        info = base.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise StagingError(f"{base} is not private to this user")
        self.removed_stale = sweep_stale(base)
        self.root = Path(tempfile.mkdtemp(prefix="worker-", dir=base))
        os.chmod(self.root, PRIVATE_DIR_MODE)
        self._lock = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self.run_dir = self.root / "run"
        make_private_dir(self.run_dir)

    def attempt_dir(self, attempt_id: str) -> Path:
        return RunPaths(self.run_dir).attempt(attempt_id).root

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.close(self._lock)


def sweep_stale(base: Path, *, unlocked_grace_s: float = 60.0) -> list[Path]:
    """Remove the staging folders under `base` whose worker no longer holds their lock
    (a folder without a lock file is removed once it is older than a worker's start)."""
    removed: list[Path] = []
    for folder in sorted(base.glob("worker-*")):
        try:
            fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                if time.time() - folder.stat().st_mtime > unlocked_grace_s:
                    shutil.rmtree(folder, ignore_errors=True)
                    removed.append(folder)
            continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # a live worker's
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)
        removed.append(folder)
    return removed
