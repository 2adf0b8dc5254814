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
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mailroom.orchestrator.actors.limits import ActorLimits

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_SLAVE = 2, 4, 0x4000, 1 << 19
SOURCE = b"mailroom-actor"  # the tmpfs's source name, in the actor's own mountinfo
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
RECEIVE_TIMEOUT_S = 30.0  # generous: the child sent it before it exec'd
PROBE_TIMEOUT_S = 30.0
COPY_CHUNK = 1 << 20


class ActorFilesystemError(OSError):
    """The episode's tmpfs could not be made or its root was not received."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


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
bounded = b"size=1m,nr_inodes=8"
if libc.mount({SOURCE!r}, sys.argv[1].encode(), b"tmpfs", {MS_NOSUID | MS_NODEV}, bounded) != 0:
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
    not_kept: list[str] = field(default_factory=list)  # what was not copied, and why

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
            "not_kept": self.not_kept[:20],
            "not_kept_count": len(self.not_kept),
        }


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
        self._parent, self._child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
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
        libc = _libc()  # loaded in the parent: the child only calls it
        options = _options(self.size_bytes, self.inodes)
        anchor = bytes(ANCHOR)
        child, targets, (uid, gid) = self._child, dict(self.bwrap_fds), self.owner

        def step() -> None:
            if (
                libc.unshare(CLONE_NEWNS) != 0
                or libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0
                or libc.mount(SOURCE, anchor, b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0
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
            socket.send_fds(child, [b"1"], [root])

        return step

    def receive(self) -> None:
        """The tmpfs's root from the spawned child (after the spawn returned)."""
        self._child.close()
        self._parent.settimeout(RECEIVE_TIMEOUT_S)
        try:
            _, fds, _, _ = socket.recv_fds(self._parent, 1, 1)
        except OSError as exc:
            raise ActorFilesystemError(f"the actor's tmpfs root was not received: {exc}") from exc
        finally:
            self._parent.close()  # the root is all a live episode holds of it
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise ActorFilesystemError("the actor's tmpfs root was not received")
        self._root = fds[0]

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
        endpoint = os.open(endpoint_root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for name, _, _ in FOLDERS:
                _keep_folder(self._root, name, endpoint, kept)
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


def _keep_folder(root: int, name: str, endpoint: int, kept: KeptContents) -> None:
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=endpoint)
    top = _open_folder(name, endpoint)  # held to the end: hard links name their first copy in it
    links = _Links(top, name)
    # Iterative, one pair of open folders per level (a tmpfs may hold a very deep tree).
    stack: list[tuple[int, int, str, int]] = [(_open_folder(name, root), os.dup(top), "", 0)]
    try:
        while stack:
            src, dst, path, depth = stack.pop()
            try:
                for entry in sorted(os.listdir(src)):
                    inner = f"{path}/{entry}" if path else entry
                    pushed = _keep_entry(src, dst, entry, inner, depth, kept, links)
                    if pushed is not None:
                        stack.append(pushed)
            finally:
                os.close(src)
                os.close(dst)
    finally:
        for src, dst, _, _ in stack:
            os.close(src)
            os.close(dst)
        os.close(top)


@dataclass
class _Links:
    """A hard-linked file's first copy, by its inode, as a path below the kept folder."""

    top: int
    folder: str  # the kept folder's name, before each path said of it
    first: dict[tuple[int, int], str] = field(default_factory=dict)


def _keep_entry(
    src: int,
    dst: int,
    name: str,
    path: str,
    depth: int,
    kept: KeptContents,
    links: _Links,
) -> tuple[int, int, str, int] | None:
    """Copy one entry; a folder comes back to be walked."""
    info = os.stat(name, dir_fd=src, follow_symlinks=False)
    kind = stat.S_IFMT(info.st_mode)
    try:
        if kind == stat.S_IFDIR:
            if depth + 1 > KEPT_DEPTH:
                kept.not_kept.append(f"{links.folder}/{path}: deeper than {KEPT_DEPTH} folders")
                return None
            os.mkdir(name, 0o700, dir_fd=dst)
            kept.directories += 1
            return (_open_folder(name, src), _open_folder(name, dst), path, depth + 1)
        if kind == stat.S_IFLNK:
            os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
            kept.symlinks += 1
            return None
        if kind != stat.S_IFREG:
            what = stat.filemode(info.st_mode)
            kept.not_kept.append(f"{links.folder}/{path}: not a file, folder or link ({what})")
            return None
        inode = (info.st_dev, info.st_ino)
        first = links.first.get(inode) if info.st_nlink > 1 else None
        if first is not None:
            os.link(first, name, src_dir_fd=links.top, dst_dir_fd=dst, follow_symlinks=False)
        else:
            kept.bytes_kept += _copy_file(src, dst, name, info.st_size)
            if info.st_nlink > 1:
                links.first[inode] = path
        kept.files += 1
        os.utime(name, ns=(info.st_atime_ns, info.st_mtime_ns), dir_fd=dst, follow_symlinks=False)
    except OSError as exc:
        kept.not_kept.append(f"{links.folder}/{path}: {exc.strerror or exc}")
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
