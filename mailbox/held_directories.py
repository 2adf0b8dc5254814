"""The endpoint's directories, held open for its lifetime, and the check that they still are.

An actor usually runs as the orchestrator's own user, so it can rename, replace,
chmod or symlink anything under its endpoint. The orchestrator therefore never
resolves a path the actor controls: the endpoint root, `outbox/`, `inbox/` and
`scratch/` are opened once (O_DIRECTORY | O_NOFOLLOW) when the endpoint is created, and
every later read, write, link and unlink goes through those descriptors.

Tampering is detected by comparing what the names lead to now with the held
directories: the endpoint root, `outbox/` and `inbox/` must still be the same inodes,
reached without a symlink, with the mode and owner they were given. Anything else is
`endpoint_tampered`, a terminal protocol error. `scratch/` is the actor's own and is
never checked.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from .parser import ProtocolError, ProtocolReason

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
SUBDIRS = ("outbox", "inbox", "scratch")
# A magic link per open descriptor: it leads to the held directory wherever it moved.
_PROC_FD = Path("/proc/self/fd")
T = TypeVar("T")


class EndpointTamperedError(OSError):
    """The endpoint's directories are no longer the ones the orchestrator created.

    An OSError, so a caller that maps I/O failures still sees it; map it first, to the
    terminal protocol error `endpoint_tampered` (`as_protocol_error`). The message
    names only endpoint-relative parts, never a private path.
    """

    reason: ClassVar[ProtocolReason] = ProtocolReason.ENDPOINT_TAMPERED

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        return self.detail

    def as_protocol_error(self) -> ProtocolError:
        return ProtocolError(self.reason, self.detail)


def tampered(detail: str) -> ProtocolError:
    return ProtocolError(ProtocolReason.ENDPOINT_TAMPERED, detail)


Identity = tuple[int, int]
Attributes = tuple[int, int, int]


def _identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino)


def _attributes(st: os.stat_result) -> Attributes:
    return (st.st_mode, st.st_uid, st.st_gid)


@dataclass(frozen=True)
class _Held:
    label: str
    fd: int
    identity: Identity
    attributes: Attributes


def _hold(label: str, fd: int) -> _Held:
    st = os.fstat(fd)
    return _Held(label, fd, _identity(st), _attributes(st))


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class EndpointDirs:
    """Descriptors of the endpoint root and its three folders, as they were created.

    Closed by `close()`, or when the object is garbage collected. Descriptors are
    close-on-exec: an actor process never inherits them.
    """

    def __init__(self, root: Path, root_fd: int, sub_fds: dict[str, int]) -> None:
        """Takes ownership of the descriptors (records their identity and modes now)."""
        fds = [root_fd, *sub_fds.values()]
        self._finalizer = weakref.finalize(self, _close_all, fds)
        self.root = root
        self._root = _hold("the endpoint directory", root_fd)
        self._sub = {name: _hold(f"{name}/", fd) for name, fd in sub_fds.items()}
        if set(self._sub) != set(SUBDIRS):
            self.close()
            raise ValueError(f"an endpoint holds exactly {SUBDIRS}")

    @classmethod
    def open(cls, root: Path) -> EndpointDirs:
        """Hold an existing endpoint: its root (never through a final symlink) and folders."""
        root_fd = os.open(root, DIR_FLAGS)
        subs: dict[str, int] = {}
        try:
            for name in SUBDIRS:
                subs[name] = os.open(name, DIR_FLAGS, dir_fd=root_fd)
        except BaseException:
            _close_all([root_fd, *subs.values()])
            raise
        return cls(root, root_fd, subs)

    @property
    def root_fd(self) -> int:
        return self._root.fd

    @property
    def outbox_fd(self) -> int:
        return self._sub["outbox"].fd

    @property
    def inbox_fd(self) -> int:
        return self._sub["inbox"].fd

    @property
    def scratch_fd(self) -> int:
        return self._sub["scratch"].fd

    def identity(self, name: str) -> Identity:
        """(st_dev, st_ino) of a held folder, as created."""
        return self._sub[name].identity

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> EndpointDirs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def watch_path(self, name: str) -> Path:
        """A path that leads to the held folder `name` wherever the actor moves it.

        `/proc/self/fd/<n>` where procfs is mounted (Linux); the plain path otherwise.
        """
        if _PROC_FD.is_dir():
            return _PROC_FD / str(self._sub[name].fd)
        return self.root / name

    def problem(self) -> str | None:
        """Why the endpoint can no longer be trusted, or None. Never raises."""
        if self.closed:
            return "the endpoint is no longer held"
        try:
            found = self._where("the endpoint directory", self._root, os.lstat, self.root)
            if found is not None:
                return found
            for name in ("outbox", "inbox"):
                held = self._sub[name]
                found = self._where(held.label, held, self._stat_in_root, name)
                if found is not None:
                    return found
            for held in (self._root, self._sub["outbox"], self._sub["inbox"]):
                if _attributes(os.fstat(held.fd)) != held.attributes:
                    return f"the permissions or owner of {held.label} were changed"
        except OSError as exc:
            return f"the endpoint cannot be checked: {exc.strerror}"
        return None

    def _stat_in_root(self, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=self._root.fd, follow_symlinks=False)

    @staticmethod
    def _where(
        label: str, held: _Held, stat: Callable[[T], os.stat_result], where: T
    ) -> str | None:
        try:
            st = stat(where)
        except FileNotFoundError:
            return f"{label} was removed"
        if _identity(st) != held.identity:
            return f"{label} was moved or replaced"
        return None

    def check(self) -> None:
        """Raise `EndpointTamperedError` unless the endpoint is as created."""
        problem = self.problem()
        if problem is not None:
            raise EndpointTamperedError(problem)
