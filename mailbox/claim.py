"""Exactly-once claim of a response file, Maildir style.

The file is renamed out of the actor-visible inbox into the orchestrator's private
evidence before it is parsed; a second file under an already-claimed name is a typed
duplicate. Symlinks, hard links and anything but a regular file are never read.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .parser import MAX_RESPONSE_BYTES, ProtocolError, ProtocolReason


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


def _open_regular(path: Path) -> int | ProtocolError:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return ProtocolError(ProtocolReason.SYMLINK, "response files must not be symlinks")
        return ProtocolError(ProtocolReason.UNREADABLE, f"cannot open response: {exc.strerror}")
    problem = _inspect(os.fstat(fd))
    if problem is not None:
        os.close(fd)
        return problem
    return fd


def claim_response(source: Path, evidence: Path) -> Claimed | ProtocolError:
    """Take `source` out of the inbox into `evidence` (private); return its bytes.

    Maildir's own move: link() to the private name, then unlink() the inbox name. (A
    rename out of a watched directory is an unmatched IN_MOVED_FROM, which watchdog
    holds back for half a second, delaying every later event.) Reads at most one byte
    past the parser's cap, so a huge file costs nothing.
    """
    try:
        st = os.lstat(source)
    except OSError as exc:
        return ProtocolError(ProtocolReason.UNREADABLE, f"cannot stat response: {exc.strerror}")
    problem = _inspect(st)
    if problem is not None:
        return problem
    evidence.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, evidence, follow_symlinks=False)
        linked = True
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            return ProtocolError(
                ProtocolReason.UNREADABLE, f"cannot claim response: {exc.strerror}"
            )
        linked = False
    if not linked:
        # Another filesystem (or links refused): keep a private copy of the bounded bytes.
        copied = read_response_copy(source)
        if isinstance(copied, ProtocolError):
            return copied
        evidence.write_bytes(copied)
    try:
        source.unlink()
    except OSError as exc:
        return ProtocolError(ProtocolReason.UNREADABLE, f"cannot claim response: {exc.strerror}")
    opened = _open_regular(evidence)
    if isinstance(opened, ProtocolError):
        return opened
    try:
        data = _read_bounded(opened, MAX_RESPONSE_BYTES + 1)
    except OSError as exc:
        return ProtocolError(ProtocolReason.UNREADABLE, f"cannot read response: {exc.strerror}")
    finally:
        os.close(opened)
    return Claimed(data=data, evidence=evidence)


def read_response_copy(path: Path) -> bytes | ProtocolError:
    """Read a response without claiming it (offline checks): same file rules, same cap."""
    opened = _open_regular(path)
    if isinstance(opened, ProtocolError):
        return opened
    try:
        return _read_bounded(opened, MAX_RESPONSE_BYTES + 1)
    except OSError as exc:
        return ProtocolError(ProtocolReason.UNREADABLE, f"cannot read response: {exc.strerror}")
    finally:
        os.close(opened)
