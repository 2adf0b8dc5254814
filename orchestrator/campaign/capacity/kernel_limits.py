"""What the kernel allows a launch, and what a process (tree) holds of it, from /proc.

Read, never changed, except `raise_open_files`: a worker raises its soft limit on open
descriptors to the hard one when it starts (a live episode holds about a dozen). The
limits are per process (descriptors), per user (inotify instances and watches, and
processes for a user other than root) or per machine (pids, threads); `KernelLimits.read`
takes each with what is in use already where the limit is shared. Everything here is
read from /proc, so a test can measure a worker as a launch's check counts it.
"""

from __future__ import annotations

import contextlib
import os
import resource
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
INOTIFY_LINK = "anon_inode:inotify"


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _soft(limit: int) -> int | None:
    """A resource limit's soft value, None when unlimited."""
    soft, _ = resource.getrlimit(limit)
    return None if soft == resource.RLIM_INFINITY else soft


@dataclass(frozen=True)
class OpenFilesLimit:
    """RLIMIT_NOFILE of this process: what it was, and what it is now."""

    soft_before: int
    soft: int
    hard: int


def raise_open_files() -> OpenFilesLimit:
    """Raise this process's soft limit on open descriptors to its hard limit (capped at
    the kernel's `fs/nr_open`, above which the kernel refuses it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if target == resource.RLIM_INFINITY:
        target = _read_int(PROC / "sys/fs/nr_open") or soft
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    now, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return OpenFilesLimit(soft_before=soft, soft=now, hard=hard)


@dataclass(frozen=True)
class Holdings:
    """What one process holds: descriptors, inotify instances and watches, threads."""

    fds: int
    inotify_instances: int
    inotify_watches: int
    threads: int


def holdings(pid: int | str = "self") -> Holdings:
    """Read `pid`'s descriptors (and among them its inotify instances, with the watches
    each fdinfo lists) and threads."""
    base = PROC / str(pid)
    fds = instances = watches = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(base / "fd"):
            fds += 1
            try:
                target = os.readlink(entry.path)
            except OSError:
                continue
            if target == INOTIFY_LINK:
                instances += 1
                watches += _inotify_watches(base / "fdinfo" / entry.name)
    try:
        threads = len(os.listdir(base / "task"))
    except OSError:
        threads = 0
    return Holdings(fds, instances, watches, threads)


def _inotify_watches(fdinfo: Path) -> int:
    try:
        text = fdinfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return 0
    return sum(1 for line in text.splitlines() if line.startswith("inotify wd:"))


def _status(pid: str) -> dict[str, str]:
    try:
        text = (PROC / pid / "status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def _processes() -> list[str]:
    return [e.name for e in os.scandir(PROC) if e.name.isdigit()]


def user_inotify(uid: int) -> tuple[int, int]:
    """(instances, watches) every process of `uid` holds now (the per-user limits count
    these); processes that cannot be read are passed over."""
    instances = watches = 0
    for pid in _processes():
        if _owner(pid) != uid:
            continue
        held = holdings(pid)
        instances += held.inotify_instances
        watches += held.inotify_watches
    return instances, watches


def _owner(pid: str) -> int | None:
    uids = _status(pid).get("Uid", "").split()
    return int(uids[0]) if uids else None


def user_tasks(uid: int) -> int:
    """Threads of every process whose real user is `uid` (what RLIMIT_NPROC counts)."""
    total = 0
    for pid in _processes():
        fields = _status(pid)
        uids = fields.get("Uid", "").split()
        if uids and int(uids[0]) == uid:
            total += int(fields.get("Threads", "1").strip() or 1)
    return total


def machine_tasks() -> tuple[int, int]:
    """(processes, threads) alive on the machine now."""
    processes = threads = 0
    for pid in _processes():
        try:
            threads += len(os.listdir(PROC / pid / "task"))
        except OSError:
            continue
        processes += 1
    return processes, threads


@dataclass(frozen=True)
class Descendant:
    pid: int
    name: str
    threads: int


def descendants(pid: int) -> list[Descendant]:
    """Every live (not zombie) process below `pid`, with its name and threads."""
    children: dict[int, list[int]] = {}
    named: dict[int, tuple[str, int, bool]] = {}
    for entry in _processes():
        fields = _status(entry)
        if not fields:
            continue
        with contextlib.suppress(ValueError):
            parent = int(fields.get("PPid", "0").strip())
            children.setdefault(parent, []).append(int(entry))
            named[int(entry)] = (
                fields.get("Name", "").strip(),
                int(fields.get("Threads", "1").strip() or 1),
                fields.get("State", "").startswith("Z"),
            )
    found: list[Descendant] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        todo += children.get(child, [])
        name, threads, zombie = named.get(child, ("", 1, True))
        if not zombie:
            found.append(Descendant(child, name, threads))
    return found


def namespaces(pids: list[int]) -> dict[str, int]:
    """How many distinct namespaces of each kind the processes `pids` are in."""
    seen: dict[str, set[str]] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for entry in os.scandir(PROC / str(pid) / "ns"):
                with contextlib.suppress(OSError):
                    seen.setdefault(entry.name, set()).add(os.readlink(entry.path))
    return {kind: len(ids) for kind, ids in sorted(seen.items())}


@dataclass(frozen=True)
class KernelLimits:
    """The limits a launch's live episodes meet, and what is in use of the shared ones.

    None: no such limit here (unlimited, unreadable, or not enforced: RLIMIT_NPROC is not
    enforced for root, and a sandbox started by root runs as a user of its own).
    """

    open_files: int | None
    open_files_hard: int | None
    inotify_instances: int | None
    inotify_instances_used: int
    inotify_watches: int | None
    inotify_watches_used: int
    user_processes: int | None
    user_processes_used: int
    pid_max: int | None
    threads_max: int | None
    machine_processes: int
    machine_threads: int
    user_namespaces: int | None

    @classmethod
    def read(cls) -> KernelLimits:
        """This machine's, as this user sees them now."""
        uid = os.getuid()
        sysfs = PROC / "sys"
        instances_used, watches_used = user_inotify(uid)
        processes, threads = machine_tasks()
        enforced = uid != 0
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return cls(
            open_files=_soft(resource.RLIMIT_NOFILE),
            open_files_hard=None if hard == resource.RLIM_INFINITY else hard,
            inotify_instances=_read_int(sysfs / "fs/inotify/max_user_instances"),
            inotify_instances_used=instances_used,
            inotify_watches=_read_int(sysfs / "fs/inotify/max_user_watches"),
            inotify_watches_used=watches_used,
            user_processes=_soft(resource.RLIMIT_NPROC) if enforced else None,
            user_processes_used=user_tasks(uid) if enforced else 0,
            pid_max=_read_int(sysfs / "kernel/pid_max"),
            threads_max=_read_int(sysfs / "kernel/threads-max"),
            machine_processes=processes,
            machine_threads=threads,
            user_namespaces=_read_int(sysfs / "user/max_user_namespaces"),
        )
