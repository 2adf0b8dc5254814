"""Per-episode endpoints: an opaque random directory with outbox/, inbox/ and scratch/."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

TOKEN_BYTES = 16  # 128 random bits


@dataclass(frozen=True)
class Endpoint:
    root: Path

    @property
    def token(self) -> str:
        return self.root.name

    @property
    def outbox(self) -> Path:
        return self.root / "outbox"

    @property
    def inbox(self) -> Path:
        return self.root / "inbox"

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"

    def observation_file(self, sequence: int) -> Path:
        return self.outbox / f"obs-{sequence}.json"

    def image_file(self, sequence: int, camera: str) -> Path:
        return self.outbox / f"obs-{sequence}-{camera}.png"

    def response_name(self, sequence: int) -> str:
        return f"resp-{sequence}.json"

    def response_file(self, sequence: int) -> Path:
        return self.inbox / self.response_name(sequence)

    @property
    def closed_file(self) -> Path:
        return self.outbox / "closed.json"

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def new_token() -> str:
    return secrets.token_hex(TOKEN_BYTES)


def create_endpoint(mailbox_root: Path, *, actor_uid: int | None = None) -> Endpoint:
    """Create a fresh endpoint; only its owner (and `actor_uid`, when given) may enter it.

    The name is random and independent of the case; nothing private goes under the root.
    """
    mailbox_root.mkdir(parents=True, exist_ok=True, mode=0o711)
    root = mailbox_root / new_token()
    root.mkdir(mode=0o700)
    for name, mode in (("outbox", 0o755), ("inbox", 0o700), ("scratch", 0o700)):
        (root / name).mkdir(mode=mode)
    if actor_uid is not None and actor_uid != os.getuid():
        for path in (root, root / "inbox", root / "scratch"):
            os.chown(path, actor_uid, -1)
        os.chown(root, os.getuid(), -1)
        os.chmod(root, 0o711)
    return Endpoint(root)
