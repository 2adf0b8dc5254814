"""A kernel-enforced memory ceiling per actor: one memory cgroup per episode.

A profile's `limits.memory_mb` becomes the limit of a cgroup made for the episode under
the orchestrator's own cgroup (read from /proc/self/cgroup): cgroup v2 where the memory
controller is delegated there (`memory.max`, `memory.swap.max` 0, `memory.oom.group`),
else the v1 memory controller (`memory.limit_in_bytes`, and `memory.memsw.limit_in_bytes`
where present, so that swap does not escape it). The actor's first process (bubblewrap,
or the plain actor) joins the cgroup between fork and exec, before it can allocate, by
writing itself (`0`) into a `cgroup.procs` descriptor the orchestrator opened: the kernel
checks the opener's credentials, so the child may already run as the sandbox's
unprivileged user. Everything under it is charged there, the pages of the sandbox's own `/tmp` and
`/dev/shm` included (tmpfs pages are charged to the cgroup of the process that touches
them), and the kernel memory of the files it makes.

Past the ceiling the kernel's OOM killer ends a process of that cgroup, and only there;
its count (`oom_kill` of `memory.oom_control`, v1, or `memory.events`, v2) is what
types the episode (`memory_limit`), never the exit signal alone. The cgroup is removed
when the episode ends, after its processes are gone (any still in it are killed first).

A hierarchy can accept a limit it does not enforce, so each process verifies
enforcement once, before its first episode: a probe child that allocates well past a
small limit must be killed by the OOM killer of its cgroup. Where no hierarchy is
writable, or the probe survives, actors run without a ceiling, each `actor_started`
event says so with the reason, and `launch --require-memory-limit` refuses instead.

`MAILROOM_MEMORY_CGROUP_PARENT` names the folder episode cgroups are made in instead of
the orchestrator's own cgroup: for tests (a folder that is no memory cgroup stands for
an unwritable hierarchy).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

PARENT_VARIABLE = "MAILROOM_MEMORY_CGROUP_PARENT"
EPISODE_PREFIX = "mailroom-actor-"
PROBE_PREFIX = "mailroom-probe-"
# The probe: a child that allocates (and touches) this much under this limit must die.
PROBE_LIMIT_MB = 32
PROBE_ALLOCATE_MB = 256
PROBE_TIMEOUT_S = 60.0

CgroupVersion = Literal["v1", "v2"]


@dataclass(frozen=True)
class Hierarchy:
    """Where episode cgroups are made: `parent`, a folder of a cgroup hierarchy."""

    version: CgroupVersion
    parent: Path

    def describe(self) -> str:
        return f"cgroup {self.version} at {self.parent}"


@dataclass(frozen=True)
class MemoryEnforcement:
    """Whether this process can hold actors to a memory ceiling, and where or why not."""

    hierarchy: Hierarchy | None
    reason: str  # why not, or how it was verified

    @property
    def enforced(self) -> bool:
        return self.hierarchy is not None


def _unescape(field: str) -> str:
    """A path of /proc/self/mountinfo, its octal escapes (`\\040`) undone."""
    out: list[str] = []
    i = 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class _Mount:
    root: str  # the folder of the hierarchy mounted here
    point: Path
    fstype: str
    options: frozenset[str]


def _cgroup_mounts() -> list[_Mount]:
    mounts: list[_Mount] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
                continue
            mounts.append(
                _Mount(
                    _unescape(fields[3]),
                    Path(_unescape(fields[4])),
                    tail[0],
                    frozenset(tail[2].split(",")),
                )
            )
    return mounts


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup per hierarchy: `memory` (v1) and `""` (v2)."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(","):
                found.setdefault(name, path)
    return found


def _folder_of(mount: _Mount, path: str) -> Path | None:
    """`path` (a cgroup of the hierarchy) as a folder under `mount`, if it is mounted."""
    root = Path(mount.root)
    inside = Path(path)
    if not inside.is_relative_to(root):
        return None
    folder = mount.point / inside.relative_to(root)
    return folder if folder.is_dir() else None


def _read(path: Path) -> str:
    return path.read_text().strip()


def _v2_with_memory(folder: Path) -> str | None:
    """None when children of `folder` get the memory controller (enabled here now if
    it is available), else why not."""
    try:
        if "memory" not in _read(folder / "cgroup.controllers").split():
            return f"the memory controller is not delegated to {folder}"
        if "memory" not in _read(folder / "cgroup.subtree_control").split():
            (folder / "cgroup.subtree_control").write_text("+memory")
    except OSError as exc:
        return f"the memory controller cannot be enabled below {folder}: {exc}"
    return None


def _hierarchy_at(folder: Path) -> Hierarchy | str:
    """The hierarchy of a named folder, by the files a memory cgroup has."""
    if (folder / "memory.limit_in_bytes").is_file():
        return Hierarchy("v1", folder)
    if (folder / "cgroup.controllers").is_file():
        problem = _v2_with_memory(folder)
        return problem if problem is not None else Hierarchy("v2", folder)
    return f"{folder} is not a memory cgroup (neither memory.limit_in_bytes nor cgroup.controllers)"


def find_hierarchy() -> Hierarchy | str:
    """Where this process's episode cgroups go (under its own cgroup), or why nowhere:
    cgroup v2 where the memory controller is delegated, else the v1 memory controller."""
    named = os.environ.get(PARENT_VARIABLE)
    if named:
        return _hierarchy_at(Path(named))
    own = _own_cgroups()
    mounts = _cgroup_mounts()
    reasons: list[str] = []
    if "" in own:
        for mount in (m for m in mounts if m.fstype == "cgroup2"):
            folder = _folder_of(mount, own[""])
            if folder is not None:
                problem = _v2_with_memory(folder)
                if problem is None:
                    return Hierarchy("v2", folder)
                reasons.append(problem)
                break
    if "memory" in own:
        for mount in (m for m in mounts if m.fstype == "cgroup" and "memory" in m.options):
            folder = _folder_of(mount, own["memory"])
            if folder is not None:
                return Hierarchy("v1", folder)
        reasons.append(f"this process's v1 memory cgroup {own['memory']} is not mounted here")
    if not reasons:
        reasons.append("no memory cgroup hierarchy is mounted for this process")
    return "; ".join(reasons)


def _oom_kills(text: str) -> int | None:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return None


class EpisodeCgroup:
    """One episode's memory cgroup: made with its limit, joined by the actor's first
    process in the child (`join`), read for OOM kills, removed after the episode."""

    def __init__(self, hierarchy: Hierarchy, path: Path, limit_bytes: int, procs_fd: int) -> None:
        self.hierarchy = hierarchy
        self.path = path
        self.limit_bytes = limit_bytes
        self._procs_fd: int | None = procs_fd
        self.removed = False
        self._last_kills = 0
        self._peak_bytes: int | None = None

    @classmethod
    def create(
        cls, hierarchy: Hierarchy, limit_bytes: int, prefix: str = EPISODE_PREFIX
    ) -> EpisodeCgroup:
        """Raises `OSError` where the cgroup cannot be made or limited."""
        path = hierarchy.parent / f"{prefix}{os.getpid()}-{secrets.token_hex(6)}"
        os.mkdir(path, 0o755)
        try:
            if hierarchy.version == "v1":
                (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                if (path / "memory.memsw.limit_in_bytes").exists():  # swap counts too
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
            else:
                (path / "memory.max").write_text(str(limit_bytes))
                if (path / "memory.swap.max").exists():
                    (path / "memory.swap.max").write_text("0")
                if (path / "memory.oom.group").exists():  # the whole actor goes at once
                    (path / "memory.oom.group").write_text("1")
            fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except BaseException:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            raise
        return cls(hierarchy, path, limit_bytes, fd)

    def join(self) -> None:
        """In the child, between fork and exec: move this process into the cgroup.

        The descriptor was opened by the orchestrator, whose credentials the kernel
        checks, so this works after the child changed to the sandbox's user."""
        assert self._procs_fd is not None
        os.write(self._procs_fd, b"0")  # 0: the writer itself, in any pid namespace

    def oom_kills(self) -> int:
        """Processes of the cgroup the OOM killer ended so far (the last count read once
        the cgroup is gone)."""
        if self.removed:
            return self._last_kills
        name = "memory.oom_control" if self.hierarchy.version == "v1" else "memory.events"
        with contextlib.suppress(OSError, ValueError):
            kills = _oom_kills((self.path / name).read_text())
            if kills is not None:
                self._last_kills = kills
        return self._last_kills

    def peak_bytes(self) -> int | None:
        """The most memory the cgroup held (None where the kernel does not say)."""
        if self.removed:
            return self._peak_bytes
        name = "memory.max_usage_in_bytes" if self.hierarchy.version == "v1" else "memory.peak"
        with contextlib.suppress(OSError, ValueError):
            self._peak_bytes = int(_read(self.path / name))
        return self._peak_bytes

    def processes(self) -> list[int]:
        with contextlib.suppress(OSError):
            return [int(p) for p in _read(self.path / "cgroup.procs").split()]
        return []

    def remove(self, settle_s: float = 5.0) -> bool:
        """Remove the cgroup once its processes are gone: those still in it after
        `settle_s` are killed (through a pidfd, so a recycled pid is never hit). Whether
        it is gone; again is harmless."""
        if self.removed:
            return True
        if self._procs_fd is not None:
            os.close(self._procs_fd)
            self._procs_fd = None
        deadline = time.monotonic() + settle_s
        killed_at: float | None = None
        while True:
            self.oom_kills()  # the last counts, kept once the cgroup is gone
            self.peak_bytes()
            try:
                os.rmdir(self.path)
                self._ended()
                return True
            except FileNotFoundError:
                self._ended()
                return True
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    return False
            now = time.monotonic()
            if now >= deadline and killed_at is None:
                _kill_all(self.processes())
                killed_at = now
            elif killed_at is not None and now - killed_at >= settle_s:
                return False
            time.sleep(0.02)

    def _ended(self) -> None:
        self.removed = True
        if self._peak_bytes is not None and self.path.name.startswith(EPISODE_PREFIX):
            with _PEAKS_LOCK:
                _ENDED_PEAKS.setdefault(os.getpid(), deque(maxlen=MAX_ENDED_PEAKS)).append(
                    self._peak_bytes
                )

    def close_in_parent(self) -> None:
        """After the spawn: the parent's copy of the descriptor is no longer needed."""
        if self._procs_fd is not None:
            os.close(self._procs_fd)
            self._procs_fd = None

    def document(self) -> dict[str, object]:
        return {
            "ceiling_mb": self.limit_bytes >> 20,
            "enforced": True,
            "by": f"cgroup {self.hierarchy.version}",
        }

    def outcome(self) -> dict[str, object]:
        """What the episode's cgroup saw, for `actor_stopped`."""
        return {
            "oom_kills": self.oom_kills(),
            "peak_bytes": self.peak_bytes(),
            "cgroup_removed": self.removed,
        }


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(pid)
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            finally:
                os.close(pidfd)


def joined_first(cgroup: EpisodeCgroup | None, setup: Callable[[], None]) -> Callable[[], None]:
    """A `preexec_fn`: join the episode's cgroup (if any), then `setup`."""
    if cgroup is None:
        return setup

    def both() -> None:
        cgroup.join()
        setup()

    return both


def probe(
    hierarchy: Hierarchy,
    *,
    limit_mb: int = PROBE_LIMIT_MB,
    allocate_mb: int = PROBE_ALLOCATE_MB,
) -> str | None:
    """None when a child allocating `allocate_mb` under a limit of `limit_mb` is ended by
    the OOM killer of its cgroup, else what happened instead."""
    try:
        cgroup = EpisodeCgroup.create(hierarchy, limit_mb << 20, prefix=PROBE_PREFIX)
    except OSError as exc:
        return f"no cgroup can be made in {hierarchy.parent}: {exc}"
    code = f"b = b'1' * ({allocate_mb} << 20)"  # written, so every page is touched
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", code],
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            close_fds=True,
            preexec_fn=cgroup.join,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the probe could not run in {cgroup.path}: {exc}"
    finally:
        kills = cgroup.oom_kills()
        cgroup.remove()
    if done.returncode == -signal.SIGKILL and kills >= 1:
        return None
    return (
        f"a probe allocating {allocate_mb} MiB under a limit of {limit_mb} MiB in "
        f"{hierarchy.describe()} ended with status {done.returncode} after {kills} OOM "
        "kill(s): the limit is accepted but not enforced"
    )


def sweep_stale(hierarchy: Hierarchy) -> None:
    """Remove the empty episode and probe cgroups of processes that are gone (a worker
    killed before its episodes ended). One still holding a process is left."""
    with contextlib.suppress(OSError):
        for entry in hierarchy.parent.iterdir():
            name = entry.name
            prefix = next((p for p in (EPISODE_PREFIX, PROBE_PREFIX) if name.startswith(p)), None)
            if prefix is None or not entry.is_dir():
                continue
            owner = name[len(prefix) :].partition("-")[0]
            if not owner.isdigit() or _alive(int(owner)):
                continue
            with contextlib.suppress(OSError):
                os.rmdir(entry)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_LOCK = threading.Lock()
# Per process (a forked child verifies again) and per place.
_VERIFIED: dict[tuple[int, str], MemoryEnforcement] = {}
# The peaks of the episode cgroups each process removed, not yet taken by
# `ended_actor_peaks` (a worker's admission learns from them).
MAX_ENDED_PEAKS = 256
_ENDED_PEAKS: dict[int, deque[int]] = {}
_PEAKS_LOCK = threading.Lock()  # not _LOCK: the probe's cgroup is removed under that


def _held_now(version: CgroupVersion, path: Path) -> int | None:
    name = "memory.usage_in_bytes" if version == "v1" else "memory.current"
    try:
        return int(_read(path / name))
    except (OSError, ValueError):
        return None


def live_actor_memory() -> list[int] | None:
    """What each episode cgroup this process made holds now, in bytes (its live
    actors'); None where this process makes none (no ceiling enforced here, or none
    verified yet)."""
    with _LOCK:
        found = [
            e.hierarchy
            for (pid, _), e in _VERIFIED.items()
            if pid == os.getpid() and e.hierarchy is not None
        ]
    if not found:
        return None
    return actors_memory_of([os.getpid()], found[0])


def actors_memory_of(makers: Iterable[int], hierarchy: Hierarchy) -> list[int]:
    """What each episode cgroup made by one of the processes `makers` holds now, in
    bytes: this process's live actors, or another's, as a bench looking at a launch
    reads them."""
    held: list[int] = []
    for maker in makers:
        with contextlib.suppress(OSError):
            for entry in hierarchy.parent.glob(f"{EPISODE_PREFIX}{maker}-*"):
                current = _held_now(hierarchy.version, entry)
                if current is not None:  # else removed meanwhile
                    held.append(current)
    return held


def ended_actor_peaks() -> list[int]:
    """The peaks of the episode cgroups this process removed since it last asked."""
    with _PEAKS_LOCK:
        ended = _ENDED_PEAKS.pop(os.getpid(), None)
    return list(ended or ())


def enforcement() -> MemoryEnforcement:
    """Whether this process can enforce a memory ceiling, verified once per process
    (and per place) by the probe."""
    found = find_hierarchy()
    key = (os.getpid(), found if isinstance(found, str) else found.describe())
    with _LOCK:
        known = _VERIFIED.get(key)
        if known is not None:
            return known
        if isinstance(found, str):
            result = MemoryEnforcement(None, found)
        else:
            sweep_stale(found)
            problem = probe(found)
            result = (
                MemoryEnforcement(
                    found,
                    f"{found.describe()}; a probe past a {PROBE_LIMIT_MB} MiB limit was "
                    "ended by its OOM killer",
                )
                if problem is None
                else MemoryEnforcement(None, problem)
            )
        _VERIFIED[key] = result
        return result


def ceiling_problem(memory_mb: int | None) -> str | None:
    """None when actors with this ceiling are held to it here, else why not."""
    if memory_mb is None:
        return "the profile declares no memory ceiling (limits.memory_mb is null)"
    found = enforcement()
    return None if found.enforced else found.reason


def episode_cgroup(memory_mb: int | None) -> EpisodeCgroup | None:
    """A new episode's cgroup with its ceiling, or None where none is declared or it is
    not enforced here (the actor's `actor_started` event says why)."""
    if memory_mb is None:
        return None
    found = enforcement()
    if found.hierarchy is None:
        return None
    return EpisodeCgroup.create(found.hierarchy, memory_mb << 20)


def ceiling_record(memory_mb: int | None, cgroup: EpisodeCgroup | None) -> dict[str, object]:
    """The actor's memory ceiling as its `actor_started` event records it."""
    if cgroup is not None:
        return cgroup.document()
    problem = ceiling_problem(memory_mb)
    reason = problem or "no cgroup was made for this actor"
    return {"ceiling_mb": memory_mb, "enforced": False, "reason": reason}
