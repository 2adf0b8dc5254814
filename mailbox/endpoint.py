"""Per-episode endpoints: an opaque random directory with outbox/, inbox/ and scratch/.

Access is by directory permissions. With no `actor_gid` the actor runs as the
orchestrator's own user and every directory is owner-only. With `actor_gid` (a group
whose only other member is the actor's user) the actor gets in through that group:
it may read the outbox and write the inbox and scratch; nobody else may enter. The
mailbox root itself is traverse-only for others, so endpoints cannot be listed.

Permissions do not stop an actor that runs as the orchestrator's own user: the
directories are also held open from the moment they are made
(`held_directories.EndpointDirs`), and all endpoint I/O goes through those descriptors,
never through a path the actor could have replaced.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .held_directories import DIR_FLAGS, SUBDIRS, EndpointDirs

TOKEN_BYTES = 16  # 128 random bits
ROOT_MODE = 0o711
OWNER_ONLY = 0o700
# With an actor group: (endpoint, outbox, inbox, scratch). setgid keeps the group on
# files the actor creates, so the orchestrator can read them.
GROUP_MODES = (0o750, 0o2750, 0o2770, 0o2770)


def observation_name(sequence: int) -> str:
    """The file name of observation `sequence` (in the outbox, and as a run keeps it)."""
    return f"obs-{sequence}.json"


def image_name(sequence: int, camera: str) -> str:
    """The file name of observation `sequence`'s image from `camera`."""
    return f"obs-{sequence}-{camera}.png"


def response_name(sequence: int) -> str:
    """The file name of the response to observation `sequence` (in the inbox)."""
    return f"resp-{sequence}.json"


@dataclass(frozen=True)
class Endpoint:
    """An endpoint's names, and (for a real one) its held directories.

    An endpoint made only of a path names files (for in-process transports, reports);
    one from `create_endpoint` or `open_endpoint` also holds its directories open.
    """

    root: Path
    dirs: EndpointDirs | None = field(default=None, compare=False, repr=False)

    @property
    def held(self) -> EndpointDirs:
        """The held directories; an endpoint that is only a name has none."""
        if self.dirs is None:
            raise ValueError("this endpoint is a name only; open_endpoint() holds it")
        return self.dirs

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
        return self.outbox / observation_name(sequence)

    def image_name(self, sequence: int, camera: str) -> str:
        return image_name(sequence, camera)

    def image_file(self, sequence: int, camera: str) -> Path:
        return self.outbox / self.image_name(sequence, camera)

    def response_name(self, sequence: int) -> str:
        return response_name(sequence)

    def response_file(self, sequence: int) -> Path:
        return self.inbox / self.response_name(sequence)

    @property
    def closed_file(self) -> Path:
        return self.outbox / "closed.json"

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def new_token() -> str:
    return secrets.token_hex(TOKEN_BYTES)


def make_mailbox_root(mailbox_root: Path) -> None:
    """Create the mailbox root, and any folder above it that is missing, traverse-only
    for others (0711): an actor's own user can reach its endpoint, but list nothing.

    Parallel workers create endpoints under one root: whoever makes a folder sets its
    mode; an existing folder is left as it is.
    """
    missing: list[Path] = []
    probe = mailbox_root
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=ROOT_MODE)
        except FileExistsError:
            continue
        os.chmod(directory, ROOT_MODE)


def new_mailbox_root(prefix: str = "mailroom-") -> Path:
    """A fresh mailbox root under the system's temporary folder, traverse-only for
    others (`tempfile.mkdtemp` makes it owner-only, which a sandbox user cannot enter)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(root, ROOT_MODE)
    return root


def create_endpoint(mailbox_root: Path, *, actor_gid: int | None = None) -> Endpoint:
    """Create a fresh endpoint that only the orchestrator and the actor may enter.

    The name is random and independent of the case; nothing private goes under the root.
    The folders are made, given their modes and opened relative to the endpoint's own
    descriptor, so what is held is exactly what was made.
    """
    make_mailbox_root(mailbox_root)
    root = mailbox_root / new_token()
    root.mkdir(mode=OWNER_ONLY)  # exclusive: a fresh token never meets an old directory
    fds: list[int] = []
    try:
        fds.append(os.open(root, DIR_FLAGS))
        for name in SUBDIRS:
            os.mkdir(name, OWNER_ONLY, dir_fd=fds[0])
            fds.append(os.open(name, DIR_FLAGS, dir_fd=fds[0]))
        for fd, mode in zip(fds, GROUP_MODES, strict=True):
            if actor_gid is None:
                os.chmod(fd, OWNER_ONLY)
            else:
                os.chown(fd, -1, actor_gid)  # before chmod: a chown may clear setgid
                os.chmod(fd, mode)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    dirs = EndpointDirs(root, fds[0], dict(zip(SUBDIRS, fds[1:], strict=True)))
    return Endpoint(root, dirs)


def open_endpoint(root: Path) -> Endpoint:
    """Hold an endpoint that exists already (made by `create_endpoint` earlier)."""
    return Endpoint(root, EndpointDirs.open(root))


def held_endpoint(endpoint: Endpoint) -> Endpoint:
    """`endpoint` itself when it holds its directories, else a holding copy."""
    return endpoint if endpoint.dirs is not None else open_endpoint(endpoint.root)
