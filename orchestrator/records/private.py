"""Owner-only folders and append-only logs: how the run directory's files are made.

The run directory is the orchestrator's alone (`mailroom` also runs with umask 077):
folders are owner-only, logs are created owner-only and only ever appended to.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dir(path: Path) -> None:
    """`mkdir -p path`, and `path` itself owner-only (what lies above it is not ours)."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, PRIVATE_DIR_MODE)


def open_private_log(path: Path) -> int:
    """An append-only descriptor of a private log file (created owner-only)."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)


def append_private_line(path: Path, line: str) -> None:
    """Append one whole line to a private log and fsync it: a run's own records (its
    events, an attempt's disclosures) are on disk before the command says so."""
    append_private_lines(path, [line])


def append_private_lines(path: Path, lines: Sequence[str], *, durable: bool = True) -> None:
    """Append whole lines to a private log in one write, fsynced if `durable`."""
    fd = open_private_log(path)
    try:
        data = memoryview("".join(lines).encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
