"""The actor's writable space bounded by the kernel: one tmpfs per sandboxed episode.

Where the orchestrator runs as root, a sandboxed actor's `scratch/`, `/tmp` and
`/dev/shm` are three folders of one tmpfs mounted with `size=` (the profile's scratch
quota) and `nr_inodes=` (its file quota): a write past either fails in the actor with
"No space left on device", whatever it writes, unlinked-but-open files and writes during
a chunk included (the sampled check of `mailbox/quota.py` could miss those).

The tmpfs is mounted between fork and exec, in the actor's own mount namespace, so it
never appears among the host's mounts. The child sends the worker a descriptor of its
root over a socket pair and puts each folder at the descriptor number bubblewrap's
command line names (`--bind-fd`). That descriptor keeps the filesystem after the
sandbox has gone: once the actor is stopped, its contents are copied into the endpoint
(`scratch/`, `tmp/`, `dev-shm/`) for the audit, then the descriptor is closed and the
kernel frees the pages. A worker killed first takes its descriptors, and so the
filesystems, with it: nothing is left mounted.

Where mounting is refused (not root, no mount namespaces), nothing of this is used: the
sandbox's `/tmp` and `/dev/shm` are bubblewrap's size-limited tmpfs (no inode limit, not
kept) and the scratch quota is sampled; each actor's record says which
(`filesystem_record`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mailroom.orchestrator.actors.descriptor_handoff import (
    handoff_pair,
    receive_descriptor,
    send_descriptor,
)
from mailroom.orchestrator.actors.lifetime import loaded_libc
from mailroom.orchestrator.actors.limits import ActorLimits

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_SLAVE = 2, 4, 0x4000, 1 << 19
# The tmpfs's source name, in the actor's own mountinfo: this prefix and the worker's pid.
SOURCE = "mailroom-actor"
# Where the tmpfs is mounted, in the child's mount namespace only: an empty folder of the
# host, which never sees anything mounted on it. Others may search it (not list it):
# bubblewrap, as the sandbox's unprivileged user, resolves each folder's path from the
# descriptor it is given.
ANCHOR = Path("/run/mailroom-actor-filesystem")
# The folders of the tmpfs: (name, where the sandbox shows it, mode).
FOLDERS: tuple[tuple[str, str, int], ...] = (
    ("scratch", "scratch", 0o700),
    ("tmp", "/tmp", 0o1777),
    ("dev-shm", "/dev/shm", 0o1777),
)
# The root and its three folders take inodes of their own.
OWN_INODES = 1 + len(FOLDERS)
KEPT_DEPTH = 64  # folders below each kept folder; deeper is counted, not kept (as the audit)
NAMED_NOT_KEPT = 20  # entries not kept named in the record (all are counted)
SHOWN_PATH = 256  # characters of such a name kept in the record
HARD_LINKS_NOTED = 10_000  # hard-linked files whose first copy is remembered (then copied)
LONGEST_KEPT = 64 << 30  # a file longer than this (sparse: its holes) is named, not kept
RECEIVE_TIMEOUT_S = 30.0  # generous: the child sent it before it exec'd
PROBE_TIMEOUT_S = 30.0
COPY_CHUNK = 1 << 20


class ActorFilesystemError(OSError):
    """The episode's tmpfs could not be made or its root was not received."""


def source_of(worker_pid: int) -> str:
    """The source name of the tmpfs mounts of a worker's actors."""
    return f"{SOURCE}-{worker_pid}"


def _options(size_bytes: int | None, inodes: int | None) -> bytes:
    parts = ["mode=0755"]
    if size_bytes is not None:
        parts.append(f"size={size_bytes}")
    if inodes is not None:
        parts.append(f"nr_inodes={inodes + OWN_INODES}")
    return ",".join(parts).encode()


# The probe: a child that makes its own mount namespace and mounts a bounded tmpfs on
# the anchor, as each actor's set-up will.
PROBE_PROGRAM = f"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare({CLONE_NEWNS}) != 0 or libc.mount(None, b"/", None, {MS_REC | MS_SLAVE}, None) != 0:
    sys.exit("a mount namespace: " + os.strerror(ctypes.get_errno()))
bounded, source = b"size=1m,nr_inodes=8", {SOURCE.encode()!r}
if libc.mount(source, sys.argv[1].encode(), b"tmpfs", {MS_NOSUID | MS_NODEV}, bounded) != 0:
    sys.exit("a tmpfs with size= and nr_inodes=: " + os.strerror(ctypes.get_errno()))
"""


@functools.cache
def kernel_filesystems() -> str | None:
    """None when each sandboxed actor's writable space can be a bounded tmpfs of its own
    here, else why not (asked once per process)."""
    if os.geteuid() != 0:
        return "not root: mounting a tmpfs needs root"
    try:
        ANCHOR.mkdir(mode=0o711, exist_ok=True)
        os.chmod(ANCHOR, 0o711)
    except OSError as exc:
        return f"no anchor folder {ANCHOR}: {exc.strerror}"
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", PROBE_PROGRAM, str(ANCHOR)],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the mount probe did not run: {exc}"
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return None


@dataclass
class KeptContents:
    """What was copied out of an actor's tmpfs into its endpoint, and how full it was."""

    bytes_used: int = 0
    inodes_used: int = 0
    full: bool = False  # no byte or no inode was left: a write then failed in the actor
    files: int = 0
    directories: int = 0
    symlinks: int = 0
    bytes_kept: int = 0
    not_kept: list[str] = field(default_factory=list)  # the first few not copied, and why
    not_kept_count: int = 0

    def skip(self, path: str, why: str) -> None:
        """Name something not copied (the first NAMED_NOT_KEPT, shortened), count the rest."""
        self.not_kept_count += 1
        if len(self.not_kept) < NAMED_NOT_KEPT:
            self.not_kept.append(f"{_shown(path)}: {why}")

    def document(self) -> dict[str, object]:
        return {
            "bytes_used": self.bytes_used,
            "inodes_used": self.inodes_used,
            "full": self.full,
            "kept": {
                "files": self.files,
                "directories": self.directories,
                "symlinks": self.symlinks,
                "bytes": self.bytes_kept,
            },
            "not_kept": list(self.not_kept),
            "not_kept_count": self.not_kept_count,
        }


def _shown(path: str) -> str:
    """An actor's name as a record can hold it: its bytes that are not UTF-8 escaped, and
    a long one cut in the middle."""
    text = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text if len(text) <= SHOWN_PATH else f"{text[:120]}...{text[-120:]}"


class ActorFilesystem:
    """One episode's bounded tmpfs: made in the actor's child, held and kept by the worker.

    Use: `bwrap_fds` in the sandbox's command line (`Sandbox.command` takes them: the
    command closes them after the spawn), `child_step` in the child between fork
    and exec (as root), `receive` once the spawn returned, `keep` after the actor
    stopped, `close` in every case.
    """

    def __init__(self, limits: ActorLimits, owner_uid: int, owner_gid: int) -> None:
        self.size_bytes = None if limits.scratch_quota_mb is None else limits.scratch_quota_mb << 20
        self.inodes = limits.scratch_quota_files
        self.owner = (owner_uid, owner_gid)
        self._root: int | None = None
        self._parent, self._child = handoff_pair()
        # Descriptor numbers the sandbox's command names; the child puts each folder there.
        self.bwrap_fds: dict[str, int] = {}
        try:
            for name, _, _ in FOLDERS:
                self.bwrap_fds[name] = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            for fd in self.bwrap_fds.values():
                os.close(fd)
            self.close()
            raise

    def document(self) -> dict[str, object]:
        """What the actor's record says of it."""
        return {
            "enforced": "kernel",
            "size_mb": None if self.size_bytes is None else self.size_bytes >> 20,
            "inodes": self.inodes,
            "folders": [inside for _, inside, _ in FOLDERS],
        }

    def child_step(self) -> Callable[[], None]:
        """Runs in the child between fork and exec, as root: a mount namespace of its own,
        the tmpfs on the anchor, its folders at the numbers bubblewrap is given, and its
        root sent to the worker."""
        libc = loaded_libc()  # loaded in the parent: the child only calls it
        options = _options(self.size_bytes, self.inodes)
        source = source_of(os.getpid()).encode()
        anchor = bytes(ANCHOR)
        child, targets, (uid, gid) = self._child, dict(self.bwrap_fds), self.owner

        def step() -> None:
            if (
                libc.unshare(CLONE_NEWNS) != 0
                or libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0
                or libc.mount(source, anchor, b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0
            ):
                number = ctypes.get_errno()
                raise OSError(number, f"the actor's tmpfs: {os.strerror(number)}")
            root = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            for name, _, mode in FOLDERS:
                os.mkdir(name, mode, dir_fd=root)
                os.chmod(name, mode, dir_fd=root)  # not the umask's
                os.chown(name, uid, gid, dir_fd=root, follow_symlinks=False)
                folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=root)
                os.dup2(folder, targets[name])
                os.close(folder)
            send_descriptor(child, root)

        return step

    def receive(self) -> None:
        """The tmpfs's root from the spawned child (after the spawn returned): the root is
        all a live episode holds of it."""
        try:
            self._root = receive_descriptor(
                self._parent, self._child, RECEIVE_TIMEOUT_S, "the actor's tmpfs root"
            )
        except OSError as exc:
            raise ActorFilesystemError(str(exc)) from exc

    @property
    def device(self) -> int | None:
        """The tmpfs's device number, while the worker holds it."""
        return None if self._root is None else os.fstat(self._root).st_dev

    def keep(self, endpoint_root: Path) -> KeptContents:
        """Copy what the actor left into its endpoint (`scratch/`, `tmp/`, `dev-shm/`):
        no link followed, holes kept, hard links made once, fifos and sockets named."""
        kept = KeptContents()
        if self._root is None:
            return kept
        usage = os.fstatvfs(self._root)
        kept.bytes_used = (usage.f_blocks - usage.f_bfree) * usage.f_frsize
        kept.inodes_used = max(0, usage.f_files - usage.f_ffree - OWN_INODES)
        kept.full = usage.f_bfree == 0 or usage.f_ffree == 0
        # What is kept never exceeds what the tmpfs held, twice over (a hard link that
        # could not be made is a copy): a bound on the disk the run's records take.
        budget = _Budget(bytes=2 * max(kept.bytes_used, COPY_CHUNK), entries=2 * usage.f_files)
        endpoint = os.open(endpoint_root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for name, _, _ in FOLDERS:
                _keep_folder(self._root, name, endpoint, kept, budget)
        finally:
            os.close(endpoint)
        return kept

    def close(self) -> None:
        """Close what the worker holds: the kernel frees the tmpfs once nothing else does."""
        for sock in (self._parent, self._child):
            sock.close()
        if self._root is not None:
            with contextlib.suppress(OSError):
                os.close(self._root)
            self._root = None


def _open_folder(name: str, dir_fd: int) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)


@dataclass
class _Budget:
    """What may still be written into the endpoint."""

    bytes: int
    entries: int


@dataclass
class _Walk:
    """One kept folder's copy: where its hard-linked files' first copies are."""

    top: int  # the kept folder in the endpoint, held to the end
    folder: str  # its name, before each path said of it
    kept: KeptContents
    budget: _Budget
    first: dict[tuple[int, int], str] = field(default_factory=dict)


@dataclass
class _Level:
    """A folder being copied: both sides open, the names still to copy."""

    src: int
    dst: int
    path: str
    names: list[str]

    def close(self) -> None:
        os.close(self.src)
        os.close(self.dst)


def _open_level(src_dir: int, dst_dir: int, name: str, path: str) -> _Level:
    src = _open_folder(name, src_dir)
    try:
        dst = _open_folder(name, dst_dir)
        try:
            names = sorted(os.listdir(src), reverse=True)  # popped from the end
        except BaseException:
            os.close(dst)
            raise
    except BaseException:
        os.close(src)
        raise
    return _Level(src, dst, path, names)


def _keep_folder(root: int, name: str, endpoint: int, kept: KeptContents, budget: _Budget) -> None:
    """Depth first, one open pair of folders per level (at most KEPT_DEPTH + 1 pairs,
    however wide or deep the actor's tree)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=endpoint)
    top = _open_folder(name, endpoint)
    walk = _Walk(top, name, kept, budget)
    levels: list[_Level] = []
    try:
        levels.append(_open_level(root, endpoint, name, ""))
        while levels:
            level = levels[-1]
            if not level.names:
                levels.pop().close()
                continue
            entry = level.names.pop()
            inner = f"{level.path}/{entry}" if level.path else entry
            deeper = _keep_entry(level, entry, inner, len(levels) - 1, walk)
            if deeper is not None:
                levels.append(deeper)
    finally:
        for level in levels:
            level.close()
        os.close(top)


def _keep_entry(level: _Level, name: str, path: str, depth: int, walk: _Walk) -> _Level | None:
    """Copy one entry; a folder comes back open, to be walked."""
    kept, shown = walk.kept, f"{walk.folder}/{path}"
    try:
        info = os.stat(name, dir_fd=level.src, follow_symlinks=False)
        kind = stat.S_IFMT(info.st_mode)
        if walk.budget.entries <= 0:
            kept.skip(shown, "past what is kept of entries")
            return None
        walk.budget.entries -= 1
        if kind == stat.S_IFDIR:
            if depth + 1 > KEPT_DEPTH:
                kept.skip(shown, f"deeper than {KEPT_DEPTH} folders")
                return None
            os.mkdir(name, 0o700, dir_fd=level.dst)
            deeper = _open_level(level.src, level.dst, name, path)
            kept.directories += 1
            return deeper
        if kind == stat.S_IFLNK:
            os.symlink(os.readlink(name, dir_fd=level.src), name, dir_fd=level.dst)
            kept.symlinks += 1
            return None
        if kind != stat.S_IFREG:
            kept.skip(shown, f"not a file, folder or link ({stat.filemode(info.st_mode)})")
            return None
        if info.st_size > LONGEST_KEPT:
            kept.skip(shown, f"longer than {LONGEST_KEPT >> 30} GiB ({info.st_size} bytes)")
            return None
        inode = (info.st_dev, info.st_ino)
        first = walk.first.get(inode) if info.st_nlink > 1 else None
        if first is not None:
            os.link(first, name, src_dir_fd=walk.top, dst_dir_fd=level.dst, follow_symlinks=False)
        else:
            stored = info.st_blocks * 512
            if stored > walk.budget.bytes:
                kept.skip(shown, "past what is kept of bytes")
                return None
            copied = _copy_file(level.src, level.dst, name, info.st_size)
            walk.budget.bytes -= copied
            kept.bytes_kept += copied
            if info.st_nlink > 1 and len(walk.first) < HARD_LINKS_NOTED and len(path) <= 1024:
                walk.first[inode] = path
        kept.files += 1
        os.utime(
            name, ns=(info.st_atime_ns, info.st_mtime_ns), dir_fd=level.dst, follow_symlinks=False
        )
    except OSError as exc:
        kept.skip(shown, exc.strerror or str(exc))
    return None


def _copy_file(src_dir: int, dst_dir: int, name: str, size: int) -> int:
    """Its data only (a hole stays a hole, so a sparse file of any length costs nothing);
    the bytes copied."""
    source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src_dir)
    try:
        target = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dst_dir
        )
        try:
            copied = 0
            offset = 0
            while offset < size:
                try:
                    start = os.lseek(source, offset, os.SEEK_DATA)
                except OSError as exc:
                    if exc.errno == errno.ENXIO:  # only a hole from here on
                        break
                    raise
                end = os.lseek(source, start, os.SEEK_HOLE)
                while start < end:
                    chunk = os.pread(source, min(COPY_CHUNK, end - start), start)
                    if not chunk:
                        end = start
                        break
                    os.pwrite(target, chunk, start)
                    start += len(chunk)
                    copied += len(chunk)
                offset = end
            os.ftruncate(target, size)
            return copied
        finally:
            os.close(target)
    finally:
        os.close(source)


def filesystem_record(filesystem: ActorFilesystem | None, why_not: str | None) -> dict[str, object]:
    """What an actor's record says of its writable space: bounded by the kernel, or the
    sampled quota with why."""
    if filesystem is not None:
        return filesystem.document()
    return {"enforced": "sampled", "reason": why_not or "the actor is not sandboxed"}
