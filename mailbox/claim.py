"""Exactly-once claim of a response file.

The file is taken out of the actor-visible inbox into the orchestrator's private
evidence before it is parsed. The private name is created exclusively, so a name can be
claimed once only: a second file under an already-claimed name is a typed duplicate,
never a second decision. Symlinks, hard-linked files and anything but a regular file
are never read, and the inbox is reached through a held descriptor only.

The evidence is the orchestrator's own copy of the bytes it judged, never the actor's
inode: an actor that kept a descriptor on its response cannot rewrite the record after
the claim, or leave a file of its own (with its own modes) in the run directory.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from .held_directories import DIR_FLAGS
from .parser import MAX_RESPONSE_BYTES, ProtocolError, ProtocolReason

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class Claimed:
    data: bytes
    evidence: Path


def _read_bounded(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 65536))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _inspect(st: os.stat_result) -> ProtocolError | None:
    if stat.S_ISLNK(st.st_mode):
        return ProtocolError(ProtocolReason.SYMLINK, "response files must not be symlinks")
    if not stat.S_ISREG(st.st_mode):
        return ProtocolError(ProtocolReason.NOT_REGULAR_FILE, "response must be a regular file")
    if st.st_nlink > 1:
        return ProtocolError(ProtocolReason.HARD_LINK, "response file has other hard links")
    return None


def _unreadable(what: str, exc: OSError) -> ProtocolError:
    # strerror only: the exception's text would carry private paths.
    return ProtocolError(ProtocolReason.UNREADABLE, f"cannot {what} response: {exc.strerror}")


def _already_claimed() -> ProtocolError:
    return ProtocolError(
        ProtocolReason.DUPLICATE_RESPONSE, "a response under this name was already claimed"
    )


def _open_regular(name: str | Path, dir_fd: int | None = None) -> int | ProtocolError:
    try:
        fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return ProtocolError(ProtocolReason.SYMLINK, "response files must not be symlinks")
        return _unreadable("open", exc)
    try:
        problem = _inspect(os.fstat(fd))
    except OSError as exc:
        problem = _unreadable("stat", exc)
    if problem is not None:
        os.close(fd)
        return problem
    return fd


def _read_regular(name: str | Path, dir_fd: int | None = None) -> bytes | ProtocolError:
    opened = _open_regular(name, dir_fd)
    if isinstance(opened, ProtocolError):
        return opened
    try:
        return _read_bounded(opened, MAX_RESPONSE_BYTES + 1)
    except OSError as exc:
        return _unreadable("read", exc)
    finally:
        os.close(opened)


_EXCLUSIVE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, _EXCLUSIVE, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _keep_exclusively(data: bytes, evidence: Path) -> ProtocolError | None:
    """Write `data` to `evidence` whole: a private temporary name, then a link that
    fails if the name exists (a claimed name is never claimed twice). Where the private
    filesystem refuses links, the name itself is created exclusively and written."""
    staged = evidence.with_name(f".{evidence.name}.{secrets.token_hex(6)}.tmp")
    try:
        _write_new(staged, data)
        try:
            os.link(staged, evidence)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            _write_new(evidence, data)
    except FileExistsError:
        return _already_claimed()
    except OSError as exc:
        return _unreadable("keep", exc)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(staged)
    return None


def _same_inode(inbox_fd: int, name: str, st: os.stat_result) -> bool:
    try:
        now = os.stat(name, dir_fd=inbox_fd, follow_symlinks=False)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def claim_from(inbox_fd: int, name: str, evidence: Path) -> Claimed | ProtocolError:
    """Take `name` out of the inbox held by `inbox_fd` into `evidence` (private).

    The file is opened once (never through a symlink) and at most one byte past the
    parser's cap is read, so a huge file costs nothing; those bytes are kept privately
    and exclusively, then the inbox name is unlinked. (A rename out of a watched
    directory is an unmatched IN_MOVED_FROM, which watchdog 7's InotifyMoveEventGrouper
    holds back for half a second, delaying every later event of that watch: so copy and
    unlink, never rename.) The inbox is only ever reached through its descriptor: an
    `inbox/` the actor replaced (by a symlink, say) is never followed.
    """
    try:
        st = os.stat(name, dir_fd=inbox_fd, follow_symlinks=False)
    except OSError as exc:
        return _unreadable("stat", exc)
    problem = _inspect(st)
    if problem is not None:
        return problem
    opened = _open_regular(name, inbox_fd)
    if isinstance(opened, ProtocolError):
        return opened
    try:
        taken = os.fstat(opened)
        data = _read_bounded(opened, MAX_RESPONSE_BYTES + 1)
    except OSError as exc:
        return _unreadable("read", exc)
    finally:
        os.close(opened)
    try:
        evidence.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _unreadable("keep", exc)
    kept = _keep_exclusively(data, evidence)
    if kept is not None:
        return kept
    # Unlink only the file that was taken: one put under the same name since is left
    # in the inbox, where it shows up as a duplicate.
    if _same_inode(inbox_fd, name, taken):
        try:
            os.unlink(name, dir_fd=inbox_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            return _unreadable("claim", exc)
    return Claimed(data=data, evidence=evidence)


def claim_response(source: Path, evidence: Path) -> Claimed | ProtocolError:
    """`claim_from` for a file named by path (its directory is held for the claim)."""
    try:
        inbox_fd = os.open(source.parent, DIR_FLAGS)
    except OSError as exc:
        return _unreadable("open the directory of", exc)
    try:
        return claim_from(inbox_fd, source.name, evidence)
    finally:
        os.close(inbox_fd)


def read_response_copy(path: Path) -> bytes | ProtocolError:
    """Read a response without claiming it (offline checks): same file rules, same cap."""
    return _read_regular(path)
