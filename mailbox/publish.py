"""Atomic publication: temp name in the same directory, rename; durable on request.

Atomic: a reader only ever sees a whole file under its final name. Durable (`durable=
True`, the default here) adds an fsync of each file before its rename and of the
directory after, so the file also survives a machine crash. The orchestrator's own
records are durable; outbox files follow the run's declared `outbox_durability`.

`publish_bytes` writes the orchestrator's own (private) files by path.
`publish_into` does the same inside a held directory, by descriptor only, and
`publish_to_outbox` publishes into an endpoint's held `outbox/` after checking that the
actor has not tampered with the endpoint.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from .held_directories import EndpointDirs, EndpointTamperedError

# How observation files reach the outbox (a run's declared `outbox_durability`). Both are
# atomic (temporary name, rename): the actor only ever sees whole files. `durable` also
# fsyncs each file and the outbox, so a published observation survives a machine crash;
# outbox files only ever serve the live actor (an endpoint is never reused, the
# orchestrator keeps its own copies).
OutboxDurability = Literal["atomic", "durable"]

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# Failures a file or folder the actor put in the way can cause (a directory under the
# final name, an immutable outbox...), as opposed to the machine's own (ENOSPC, EIO).
_OBSTRUCTED = frozenset(
    {
        errno.EISDIR,
        errno.ENOTDIR,
        errno.ENOTEMPTY,
        errno.EEXIST,
        errno.ELOOP,
        errno.EACCES,
        errno.EPERM,
        errno.EBUSY,
    }
)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Make `path` appear whole or not at all; readers only ever see final names."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_directory(path.parent)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _plain_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a plain file name: {name!r}")


def publish_into(dir_fd: int, name: str, data: bytes, *, durable: bool = True) -> None:
    """`publish_bytes` inside the directory held by `dir_fd`: no path is ever resolved."""
    publish_all_into(dir_fd, [(name, data)], durable=durable)


def _stage(dir_fd: int, name: str, data: bytes, durable: bool) -> str:
    _plain_name(name)
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, _CREATE_FLAGS, 0o644, dir_fd=dir_fd)
    try:
        os.fchmod(fd, 0o644)  # readable by the actor's group whatever the umask
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        _discard(tmp, dir_fd)
        raise
    os.close(fd)
    return tmp


def publish_all_into(
    dir_fd: int, items: Sequence[tuple[str, bytes]], *, durable: bool = True
) -> None:
    """Publish several files in order: every one is written (and synced) under a temporary
    name first, then each is renamed to its final name in the given order, then the
    directory is synced once. A reader that sees a later name sees the earlier ones."""
    staged: list[tuple[str, str]] = []
    try:
        for name, data in items:
            staged.append((_stage(dir_fd, name, data, durable), name))
        while staged:
            tmp, name = staged[0]
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            staged.pop(0)
    except BaseException:
        for tmp, _ in staged:
            _discard(tmp, dir_fd)
        raise
    if durable:
        os.fsync(dir_fd)


def _discard(name: str, dir_fd: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


def publish_to_outbox(dirs: EndpointDirs, name: str, data: bytes, *, durable: bool = True) -> None:
    """Publish `outbox/<name>` through the held outbox (see `publish_all_to_outbox`)."""
    publish_all_to_outbox(dirs, [(name, data)], durable=durable)


def publish_all_to_outbox(
    dirs: EndpointDirs,
    items: Sequence[tuple[str, bytes]],
    *,
    durable: bool = True,
    check_after: bool = True,
) -> None:
    """Publish files into the held outbox, in order (`publish_all_into`).

    Raises `EndpointTamperedError` when the endpoint is not as created (checked before
    and after), or when something the actor put in the way stops the publication. Other
    OSErrors (a full disk) are the machine's and pass through unchanged. A caller that
    passes `check_after=False` must call `dirs.check()` itself once the files are out.
    """
    dirs.check()
    try:
        publish_all_into(dirs.outbox_fd, items, durable=durable)
    except OSError as exc:
        dirs.check()
        if exc.errno in _OBSTRUCTED:
            names = ", ".join(f"outbox/{name}" for name, _ in items)
            raise EndpointTamperedError(f"{names} could not be published: {exc.strerror}") from exc
        raise
    if check_after:
        dirs.check()


def document_bytes(document: object, *, sort_keys: bool = True) -> bytes:
    """A published JSON file's bytes: one space of indent a level, UTF-8 with non-ASCII
    kept, no NaN, a trailing newline; keys sorted, or in the document's own order where
    that order is the file's (a plan, the frozen catalog).

    Every JSON file the project publishes has these bytes: observations and the closed
    notice in an outbox, the run manifest, results, the audit verdict, plans, the
    catalog. No content hash is computed over them (that is
    `mailroom.hashing.canonical_bytes`); a hash of such a file is of the file as
    written: `catalog_sha256`, of the frozen catalog.
    """
    text = json.dumps(document, sort_keys=sort_keys, ensure_ascii=False, allow_nan=False, indent=1)
    return (text + "\n").encode("utf-8")


def publish_json(path: Path, document: object, *, durable: bool = True) -> None:
    publish_bytes(path, document_bytes(document), durable=durable)
