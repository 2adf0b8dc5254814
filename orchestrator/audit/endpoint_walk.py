"""What an actor could read under its endpoint: every name, and every file's text.

Everything under `outbox/`, and the endpoint's own folders, are handed to the actor;
every other name and file was written by the actor itself (`source_of`). The walk goes
from folder descriptor to folder descriptor, never following a symlink (its target is
read as a name), reads a file as overlapping chunks (bounded memory, no identifier split
unseen) and a PNG only for its text chunks (never its pixels); past a depth cap, or where
a folder cannot be listed or a file read, the attempt is unverifiable.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path

from mailroom.mailbox.held_directories import SUBDIRS
from mailroom.orchestrator.audit.findings import AttemptScan
from mailroom.orchestrator.records.audit_verdict import Source

CHUNK_BYTES = 1 << 20
CHUNK_OVERLAP = 4096  # longer than any identifier with its context
MAX_PNG_TEXT = 1 << 20
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_SCAN_DEPTH = 64  # folders under an endpoint; deeper is unverifiable


def source_of(where: str) -> Source:
    """Who put a name under an endpoint there: everything under `outbox/`, and the
    endpoint's own folders, are the orchestrator's; the rest is the actor's."""
    top, slash, _ = where.partition("/")
    if top == "outbox" or (not slash and top in SUBDIRS):
        return "handed"
    return "actor_written"


def _chunks(fd: int) -> Iterator[str]:
    """A file as overlapping text chunks: bounded memory, no identifier split unseen."""
    tail = b""
    while data := os.read(fd, CHUNK_BYTES):
        block = tail + data
        yield block.decode("utf-8", errors="replace")
        tail = block[-CHUNK_OVERLAP:]


def _png_text(fd: int) -> str:
    """The text chunks of a PNG (tEXt, iTXt, zTXt); pixel data is never read."""
    texts: list[bytes] = []
    offset, total = len(PNG_MAGIC), 0
    while total < MAX_PNG_TEXT:
        header = os.pread(fd, 8, offset)
        if len(header) < 8:
            break
        length, kind = int.from_bytes(header[:4], "big"), header[4:]
        if kind in (b"tEXt", b"iTXt", b"zTXt"):
            body = os.pread(fd, min(length, MAX_PNG_TEXT - total), offset + 8)
            if kind == b"zTXt":
                keyword, _, rest = body.partition(b"\0")
                try:
                    inflated = zlib.decompressobj().decompress(rest[1:], MAX_PNG_TEXT)
                except zlib.error:
                    inflated = rest  # searched as it is
                body = keyword + b" " + inflated
            texts.append(body.replace(b"\0", b" "))
            total += len(body)
        if kind == b"IEND":
            break
        offset += 12 + length
    return "\n".join(t.decode("utf-8", errors="replace") for t in texts)


def _scan_file(scan: AttemptScan, dir_fd: int, name: str, where: str, source: Source) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(name, flags, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return  # replaced by something else since it was listed: its name was seen
        if os.pread(fd, len(PNG_MAGIC), 0) == PNG_MAGIC:
            scan.text(where, _png_text(fd), source=source)
            return
        for chunk in _chunks(fd):
            scan.text(where, chunk, source=source)
    finally:
        os.close(fd)


def shown_name(name: str) -> str:
    """A file name as text that is always valid UTF-8 (an actor may write any bytes)."""
    return os.fsencode(name).decode("utf-8", errors="backslashreplace")


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def scan_endpoint(scan: AttemptScan, root: Path) -> None:
    """Every name under the endpoint, and every file's text; symlinks are never followed.

    The walk goes from folder descriptor to folder descriptor, so no path length limits
    it (only a depth cap, past which the attempt is unverifiable), and names are shown
    escaped, so no name an actor chose can break the record.
    """
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        scan.findings.cannot_verify(scan.attempt_id, f"cannot open the endpoint: {exc.strerror}")
        return
    _scan_folder(scan, top, "", 0)


def _scan_folder(scan: AttemptScan, dir_fd: int, relative: str, depth: int) -> None:
    """One folder (its descriptor is closed here), then each subfolder, depth first."""
    try:
        try:
            with os.scandir(dir_fd) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            scan.findings.cannot_verify(
                scan.attempt_id, f"cannot list {relative or '.'}: {exc.strerror or exc}"
            )
            return
        for entry in entries:
            shown = shown_name(entry.name)
            where = f"{relative}/{shown}" if relative else shown
            source = source_of(where)
            scan.text(where, shown, source=source)
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 > MAX_SCAN_DEPTH:
                        scan.findings.cannot_verify(
                            scan.attempt_id, f"folders nested deeper than {MAX_SCAN_DEPTH}"
                        )
                        continue
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
                    _scan_folder(scan, child, where, depth + 1)
                    continue
                scan.findings.files += 1
                if entry.is_symlink():
                    target = os.readlink(entry.name, dir_fd=dir_fd)
                    scan.text(where, shown_name(target), source=source)
                elif entry.is_file(follow_symlinks=False):
                    _scan_file(scan, dir_fd, entry.name, where, source)
            except OSError as exc:
                scan.findings.cannot_verify(
                    scan.attempt_id, f"cannot read {where}: {exc.strerror or exc}"
                )
    finally:
        os.close(dir_fd)
