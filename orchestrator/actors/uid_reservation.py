"""Outer sandbox uids reserved machine-wide: two live sandboxes never share one.

A sandbox's outer uid is drawn at random from a large range (`sandbox.OuterIdentity`),
and the sweep after its stop kills every process of that uid: a second live sandbox on
the same uid would lose its actor. So each uid is held, from its draw to the end of that
sweep, as a write lock on one byte of one file (the byte at the uid's number) in an
owner-only folder of this machine (`/run/mailroom`, never under a run directory or a
mailbox root). The lock is an open-file-description lock (`F_OFD_SETLK`): it belongs to
the descriptor, so every worker process (of this launch, of another launch, a Ray worker
on this node) conflicts with every other, and the kernel drops it when its holder closes
the descriptor or dies, SIGKILL included: a killed worker never leaks a reservation.

Locks of one descriptor never conflict with each other, so one process keeps one
descriptor for all its reservations (one open file per worker, whatever the number of its
live sandboxes) and a set of the uids it holds decides between its own threads. A forked
child starts with neither: it opens its own.

The next holder of a uid whose holder died may find a process of it still alive (a
sandbox can outlive a worker killed while it starts): `reserve_uid` hands each drawn uid
to `clear` before using it, and draws another if `clear` says it is not clear.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import stat
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from mailroom.orchestrator.actors.confinement import ConfinementError
from mailroom.orchestrator.records.private import make_private_dir

RESERVATIONS = Path("/run/mailroom")
LOCK_FILE = "sandbox-uids"
# Candidates tried before a draw gives up: every uid of a range this small or smaller,
# else this many distinct ones at random (all held: the machine runs about as many
# sandboxes as the range has uids).
MAX_CANDIDATES = 4096
_DRAW = random.SystemRandom()


class UidReservationError(ConfinementError):
    """The reservation folder or file is not this user's own and private."""


class UidRangeExhaustedError(UidReservationError):
    """Every uid tried is held by a live sandbox on this machine (or could not be cleared)."""


def _byte_lock(fd: int, offset: int, kind: int) -> bool:
    """`kind` (F_WRLCK, F_UNLCK) on the one byte at `offset`; False if another holds it.

    `struct flock` on 64-bit Linux: short type, short whence, off_t start, off_t len,
    pid_t pid (0 for an open-file-description lock), padded to 32 bytes."""
    record = struct.pack("hhqqi4x", kind, os.SEEK_SET, offset, 1, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, record)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


class _Ledger:
    """This process's descriptor of one reservation file and the uids it holds there."""

    def __init__(self, directory: Path) -> None:
        self.fd = _open_private_file(directory)
        self.held: set[int] = set()

    def take(self, uid: int) -> bool:
        if uid in self.held or not _byte_lock(self.fd, uid, fcntl.F_WRLCK):
            return False
        self.held.add(uid)
        return True

    def give_back(self, uid: int) -> None:
        if uid in self.held:
            _byte_lock(self.fd, uid, fcntl.F_UNLCK)
            self.held.discard(uid)


_guard = threading.Lock()
_ledgers: dict[Path, _Ledger] = {}


def _forget_in_child() -> None:
    """A forked child holds none of its parent's reservations (nor keeps them alive)."""
    global _guard
    _guard = threading.Lock()
    for ledger in _ledgers.values():
        os.close(ledger.fd)
    _ledgers.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def _open_private_file(directory: Path) -> int:
    """The reservation file in `directory`, both made owner-only; refused otherwise."""
    try:
        make_private_dir(directory)
        info = directory.lstat()
    except OSError as exc:
        raise UidReservationError(f"the uid reservation folder {directory}: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise UidReservationError(
            f"the uid reservation folder {directory} is not a folder private to this user"
        )
    path = directory / LOCK_FILE
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise UidReservationError(f"the uid reservation file {path}: {exc}") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        os.close(fd)
        raise UidReservationError(f"{path} is not a file private to this user")
    return fd


class UidReservation:
    """One uid held on this machine until `release` (or until this process dies)."""

    def __init__(self, uid: int, ledger: _Ledger) -> None:
        self.uid = uid
        self._ledger: _Ledger | None = ledger

    @property
    def held(self) -> bool:
        return self._ledger is not None

    def release(self) -> None:
        """Give the uid back; only once its sandbox and every process of it are gone."""
        with _guard:
            ledger, self._ledger = self._ledger, None
            # A forked child's copy gives back nothing of its parent's.
            if ledger is not None and any(ledger is known for known in _ledgers.values()):
                ledger.give_back(self.uid)


def _candidates(span: int) -> Iterator[int]:
    """Offsets into the range, at random and each once: all of a small range, else
    MAX_CANDIDATES of it, drawn one by one (most draws need only the first)."""
    if span <= MAX_CANDIDATES:
        order = list(range(span))
        _DRAW.shuffle(order)
        yield from order
        return
    seen: set[int] = set()
    while len(seen) < MAX_CANDIDATES:
        offset = _DRAW.randrange(span)
        if offset not in seen:
            seen.add(offset)
            yield offset


def reserve_uid(
    base: int,
    span: int,
    *,
    clear: Callable[[int], bool],
    directory: Path = RESERVATIONS,
) -> UidReservation:
    """A uid of `base` .. `base + span - 1` that no live holder on this machine has.

    Candidates are drawn at random without repetition; one another process or thread
    holds is passed over. `clear(uid)` runs once the uid is held and before it is handed
    out: it ends what a dead holder's sandbox left of that uid and says whether it is
    clear now (else the uid is given back and the draw goes on). Raises
    `UidRangeExhaustedError` when every candidate is held or not clear.
    """
    for offset in _candidates(span):
        uid = base + offset
        with _guard:
            ledger = _ledgers.get(directory)
            if ledger is None:
                ledger = _ledgers[directory] = _Ledger(directory)
            if not ledger.take(uid):
                continue
        reservation = UidReservation(uid, ledger)
        try:
            if clear(uid):
                return reservation
        except BaseException:
            reservation.release()
            raise
        reservation.release()
    raise UidRangeExhaustedError(
        f"no sandbox uid is free: all {min(span, MAX_CANDIDATES)} tried of the {span} from "
        f"{base} are held by live sandboxes on this machine (or keep processes that could "
        "not be ended); run fewer live episodes at once"
    )
