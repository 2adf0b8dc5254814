"""The actor's only route out: a network namespace holding nothing but its loopback, and
there a listening socket that the worker's provider gateway serves.

For a profile whose network is `gateway`, the actor's child makes a network namespace of
its own between fork and exec (as root, before it changes user), brings its loopback up,
listens on `127.0.0.1:GATEWAY_PORT` inside it and sends the worker that listening socket
over a socket pair; bubblewrap then keeps that namespace (`--share-net`) rather than
making another. The namespace has no other interface and no route: the host's loopback
services, its other addresses, DNS and the outside are unreachable, and nothing the
actor sends leaves the namespace except through connections the gateway accepts on the
socket it holds. The sandbox's user owns nothing of the namespace (the host's user
namespace does), so it cannot add an interface or a route.

An unconfined actor (`--confinement none`) shares the host's network: its gateway
socket is an ordinary one on the host's loopback, on a port the kernel chooses, which
meters it but confines nothing (recorded as the host network).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Callable

from mailroom.orchestrator.actors.descriptor_handoff import (
    handoff_pair,
    receive_descriptor,
    send_descriptor,
)
from mailroom.orchestrator.actors.lifetime import loaded_libc

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
LOOPBACK = "127.0.0.1"
# Inside the actor's own namespace nothing else listens: one fixed port for every actor.
GATEWAY_PORT = 8787
BACKLOG = 64
RECEIVE_TIMEOUT_S = 30.0
PROBE_TIMEOUT_S = 30.0


class ActorNetworkError(OSError):
    """The actor's network namespace or its gateway socket could not be made or received."""


def _loopback_up() -> None:
    """Bring `lo` up in the current network namespace (a new one starts with it down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(probe.fileno(), SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def _listener(port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK, port))
        listener.listen(BACKLOG)
    except BaseException:
        listener.close()
        raise
    return listener


PROBE_PROGRAM = f"""
import ctypes, fcntl, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare({CLONE_NEWNET}) != 0:
    sys.exit("a network namespace: " + os.strerror(ctypes.get_errno()))
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), {SIOCGIFFLAGS},
        struct.pack("16sH14x", b"lo", 0)))[1]
    fcntl.ioctl(s.fileno(), {SIOCSIFFLAGS}, struct.pack("16sH14x", b"lo", flags | {IFF_UP}))
socket.create_server(("{LOOPBACK}", {GATEWAY_PORT})).close()
"""


@functools.cache
def actor_networks() -> str | None:
    """None when each sandboxed actor can have a network namespace of its own with the
    gateway's socket in it, else why not (asked once per process)."""
    if os.geteuid() != 0:
        return "not root: making an actor's network namespace needs root"
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", PROBE_PROGRAM],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the network namespace probe did not run: {exc}"
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return None


class ActorNetwork:
    """One actor's route to the gateway: its listening socket, made in the actor's own
    network namespace (`confined`) or on the host's loopback.

    Use (confined): `child_step` in the child between fork and exec (as root), `receive`
    once the spawn returned, then `take_listener` for the gateway; `close` in every case.
    Unconfined: the listener exists from the start (`child_step` does nothing).
    """

    def __init__(self, *, confined: bool) -> None:
        self.confined = confined
        self._listener: socket.socket | None = None
        self._parent: socket.socket | None = None
        self._child: socket.socket | None = None
        if confined:
            self._parent, self._child = handoff_pair()
        else:
            self._listener = _listener(0)

    @property
    def port(self) -> int:
        """The port the actor reaches the gateway on, at `127.0.0.1`."""
        if not self.confined and self._listener is not None:
            return int(self._listener.getsockname()[1])
        return GATEWAY_PORT

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def child_step(self) -> Callable[[], None]:
        """Runs in the child between fork and exec, as root: its own network namespace,
        loopback up, the gateway's socket listening there and sent to the worker. The
        child keeps no copy of it."""
        if not self.confined:
            return lambda: None
        libc = loaded_libc()  # loaded in the parent: the child only calls it
        child = self._child
        assert child is not None

        def step() -> None:
            if libc.unshare(CLONE_NEWNET) != 0:
                number = ctypes.get_errno()
                raise OSError(number, f"the actor's network namespace: {os.strerror(number)}")
            _loopback_up()
            listener = _listener(GATEWAY_PORT)
            try:
                send_descriptor(child, listener.fileno())
            finally:
                listener.close()
            child.close()

        return step

    def receive(self) -> None:
        """The listening socket from the spawned child (after the spawn returned)."""
        if not self.confined:
            return
        assert self._parent is not None and self._child is not None
        try:
            fd = receive_descriptor(
                self._parent, self._child, RECEIVE_TIMEOUT_S, "the actor's gateway socket"
            )
        except OSError as exc:
            raise ActorNetworkError(str(exc)) from exc
        self._listener = socket.socket(fileno=fd)

    def take_listener(self) -> socket.socket:
        """The listening socket, now the caller's (the gateway serves and closes it)."""
        if self._listener is None:
            raise ActorNetworkError("the actor's gateway socket is not here")
        listener, self._listener = self._listener, None
        return listener

    def close(self) -> None:
        for held in (self._listener, self._parent, self._child):
            if held is not None:
                with contextlib.suppress(OSError):
                    held.close()
        self._listener = None

    def document(self) -> dict[str, object]:
        """What the actor's record says of its network."""
        return {
            "route": "gateway",
            "namespace": "own" if self.confined else "host",
            "base_url": self.base_url,
        }
