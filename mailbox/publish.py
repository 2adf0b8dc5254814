"""Atomic, durable publication: temp name in the same directory, fsync, rename, fsync dir."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path


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


def canonical_json(document: object) -> bytes:
    """Stable bytes for a JSON document: sorted keys, no NaN, UTF-8, trailing newline."""
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, allow_nan=False, indent=1)
    return (text + "\n").encode("utf-8")


def publish_json(path: Path, document: object, *, durable: bool = True) -> None:
    publish_bytes(path, canonical_json(document), durable=durable)
