"""The outer identity a sandbox runs as: a fresh unprivileged uid, its leftovers, what it
can reach.

When the orchestrator runs as root, bubblewrap itself starts as a fresh unprivileged
uid and gid (one per episode, with no passwd entry and no other membership): the
actor's files belong to it outside, it owns nothing of the evaluator, and after the
episode no process of that uid may remain (`leftover_processes`). The uid is reserved
on the machine from its draw until that sweep is done (`uid_reservation.py`), so no
other live sandbox has it. The endpoint lets that group in
(`create_endpoint(actor_gid=...)`). Such a user is in no group, so a path the sandbox
must show it (a declared read-only path, the mailbox root) is refused unless others may
pass it (`refuse_unreachable`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from mailroom.orchestrator.actors.hidden_paths import SandboxPathError
from mailroom.orchestrator.actors.uid_reservation import (
    RESERVATIONS,
    UidReservation,
    reserve_uid,
)

# Fresh outer ids: above systemd's container range (524288-1879048191), in the range it
# leaves unassigned, far from any real account or subordinate-id range.
OUTER_ID_BASE = 0x70000000
OUTER_ID_SPAN = 1 << 24


@dataclass(frozen=True)
class OuterIdentity:
    """The uid and gid bubblewrap starts as outside (None: the evaluator's own).

    A fresh one is reserved on this machine (`uid_reservation.py`) until `release`,
    which comes after its sandbox stopped and the sweep of its leftover processes.
    """

    uid: int | None
    gid: int | None
    reservation: UidReservation | None = field(default=None, compare=False, repr=False)

    @classmethod
    def fresh(
        cls,
        *,
        reservations: Path = RESERVATIONS,
        base: int = OUTER_ID_BASE,
        span: int = OUTER_ID_SPAN,
    ) -> OuterIdentity:
        if os.geteuid() != 0:
            return cls(None, None)  # an unprivileged evaluator cannot change user
        held = reserve_uid(base, span, clear=cleared_of_leftovers, directory=reservations)
        return cls(held.uid, held.uid, held)

    def release(self) -> None:
        """Give the uid back (nothing for the evaluator's own); again is harmless."""
        if self.reservation is not None:
            self.reservation.release()


def leftover_processes(uid: int) -> list[int]:
    """Processes of `uid` still alive (zombies excluded), from /proc."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        uids = fields.get("Uid", "").split()
        if uids and int(uids[0]) == uid and not fields.get("State", "").startswith("Z"):
            found.append(int(entry.name))
    return found


def kill_leftovers(uid: int, settle_s: float = 2.0) -> int:
    """Processes of `uid` still alive `settle_s` after its sandbox ended, killed now.

    The kernel ends a pid namespace's processes when its first process dies, but not
    at once: what remains after the settling time escaped the namespace, and is counted.
    Each is signalled through a pidfd after its owner is checked again, so a recycled pid
    is never hit.
    """
    deadline = time.monotonic() + settle_s
    while (pids := leftover_processes(uid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in pids:
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(pid)
            try:
                if pid in leftover_processes(uid):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            finally:
                os.close(pidfd)
    return len(pids)


def cleared_of_leftovers(uid: int, settle_s: float = 2.0) -> bool:
    """Whether no process of `uid` is left, once what there was has been killed and given
    `settle_s` to go: a newly reserved uid may still have a process of the sandbox of a
    worker that was killed while it held it."""
    if not leftover_processes(uid):
        return True
    kill_leftovers(uid, settle_s=0.0)
    deadline = time.monotonic() + settle_s
    while leftover_processes(uid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def unreachable_part(path: Path, *, read: bool = True) -> Path | None:
    """The first part of `path` a fresh unprivileged user cannot pass (or, at the end and
    with `read`, read), or None: such a user is in no group, so only others' bits count."""
    real = Path(os.path.realpath(path))
    parts = [*reversed(real.parents), real]
    for part in parts:
        try:
            mode = part.stat().st_mode
        except OSError:
            return part
        last = part == real
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return part
        if last and read and not mode & stat.S_IROTH:
            return part
    return None


def refuse_unreachable(path: Path, what: str, *, read: bool = True) -> None:
    if os.geteuid() != 0:
        return  # the sandbox runs as the evaluator's own user, who reaches it
    blocked = unreachable_part(path, read=read)
    if blocked is not None:
        raise SandboxPathError(
            f"{what} {path} cannot be reached by the sandbox's unprivileged user: {blocked} "
            f"is not {'readable and ' if read else ''}searchable by others "
            f"(chmod o+{'r' if read else ''}x, or choose another place)"
        )
