"""Per-episode endpoints: an opaque random directory with outbox/, inbox/ and scratch/.

Access is by directory permissions. With no `actor_gid` the actor runs as the
orchestrator's own user and every directory is owner-only. With `actor_gid` (a group
whose only other member is the actor's user) the actor gets in through that group:
it may read the outbox and write the inbox and scratch; nobody else may enter. The
mailbox root itself is traverse-only for others, so endpoints cannot be listed.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

TOKEN_BYTES = 16  # 128 random bits
ROOT_MODE = 0o711
OWNER_ONLY = 0o700
# With an actor group: (endpoint, outbox, inbox, scratch). setgid keeps the group on
# files the actor creates, so the orchestrator can read them.
GROUP_MODES = (0o750, 0o2750, 0o2770, 0o2770)


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

    @property
    def mailbox_root(self) -> Path:
        return self.root.parent

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


def create_endpoint(mailbox_root: Path, *, actor_gid: int | None = None) -> Endpoint:
    """Create a fresh endpoint that only the orchestrator and the actor may enter.

    The name is random and independent of the case; nothing private goes under the root.
    """
    if not mailbox_root.exists():
        mailbox_root.mkdir(parents=True, mode=ROOT_MODE)
        os.chmod(mailbox_root, ROOT_MODE)
    endpoint = Endpoint(mailbox_root / new_token())
    paths = (endpoint.root, endpoint.outbox, endpoint.inbox, endpoint.scratch)
    for path in paths:
        path.mkdir(mode=OWNER_ONLY)  # exclusive: a fresh token never meets an old directory
    for path, mode in zip(paths, GROUP_MODES, strict=True):
        if actor_gid is None:
            os.chmod(path, OWNER_ONLY)
        else:
            os.chown(path, -1, actor_gid)  # before chmod: a chown may clear setgid
            os.chmod(path, mode)
    return endpoint
