"""One descriptor sent by an actor's child, between fork and exec, to its worker: the root
of the actor's own tmpfs, the gateway's socket in the actor's own network namespace.
Each is made in a namespace only the child enters, so only the child can make it."""

from __future__ import annotations

import os
import socket


def handoff_pair() -> tuple[socket.socket, socket.socket]:
    """(the worker's end, the child's end) of a new hand-off."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def send_descriptor(child_end: socket.socket, fd: int) -> None:
    """In the child: send `fd` to the worker."""
    socket.send_fds(child_end, [b"1"], [fd])


def receive_descriptor(
    worker_end: socket.socket, child_end: socket.socket, timeout_s: float, what: str
) -> int:
    """In the worker, once the spawn returned: the one descriptor the child sent, made
    non-inheritable (never handed to a later child). Both ends are closed. Raises
    `OSError` naming `what` when none came."""
    child_end.close()
    worker_end.settimeout(timeout_s)
    try:
        _, fds, _, _ = socket.recv_fds(worker_end, 1, 1)
    except OSError as exc:
        raise OSError(f"{what} was not received: {exc}") from exc
    finally:
        worker_end.close()
    for fd in fds:  # received inheritable
        os.set_inheritable(fd, False)
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise OSError(f"{what} was not received")
    return fds[0]
