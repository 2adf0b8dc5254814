"""Makes child processes die with the process that started them: the parent-death
signal, and a pid namespace per worker whose init dies with the worker.

A worker's actors run under bubblewrap, which sets its inner process's parent-death
signal only at the end of its set-up: a worker killed during those milliseconds would
leave that process (and the actor under it) running. So each worker holds its children
in a pid namespace of its own (`hold_children_in_pid_namespace`): the namespace's init
(pid 1) is a tiny process that exits as soon as the worker has exited, and when an init
exits the kernel kills every process of its namespace, nested sandboxes included,
whatever their set-up is doing. The worker itself stays in its own namespace (its pids
and /proc mean what they meant before); only the children it starts through
`start_in_namespace` (its actors) are inside: the starting thread enters the namespace
for that one fork and comes back (a thread whose children would go to another pid
namespace than its own cannot start threads).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

PR_SET_PDEATHSIG = 1
CLONE_NEWPID = 0x20000000
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_SLAVE = 2, 4, 8, 0x4000, 1 << 19
# The init's name (its `comm`), so a count of a worker's processes can tell it apart.
INIT_NAME = "mailroom-init"
INIT_READY_S = 30.0  # generous: it says so once started, named and its signals set


def die_with_parent(parent_pid: int) -> None:
    """Linux: SIGKILL this process when its parent exits (even by SIGKILL).

    If the parent is already gone (it died between our start and this call, so the
    kernel will never signal us), exit at once instead.
    """
    with contextlib.suppress(OSError, AttributeError):
        loaded_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # 0: the parent is alive, outside this process's pid namespace (a worker's children
    # are held in one of their own); a reparented process sees its new parent's pid.
    if os.getppid() not in (parent_pid, 0):
        os._exit(137)


def die_with_this_process() -> Callable[[], None]:
    """A `preexec_fn` for children of the calling process."""
    parent = os.getpid()
    loaded_libc()  # here, before the fork
    return lambda: die_with_parent(parent)


# The namespace's init, run as `python -I -S -c INIT_PROGRAM WORKER_PIDFD DIE_WITH_THREAD`:
# it ignores every signal it can (as pid 1, what it does not handle never reaches it,
# but a Ctrl-C must not end it before the worker has stopped its actors), reaps the
# orphans the namespace gives it, and exits once the worker has exited (its pidfd is
# readable). It writes "1" to its stdout once set up. With DIE_WITH_THREAD it also gets
# SIGKILL when the thread that started it ends (the parent-death signal), set before
# that first look at the pidfd, so no moment is left uncovered.
INIT_PROGRAM = f"""
import ctypes, os, select, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(15, {INIT_NAME.encode()!r}, 0, 0, 0)
if sys.argv[2] == "1":
    libc.prctl({PR_SET_PDEATHSIG}, int(signal.SIGKILL), 0, 0, 0)
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE,
            signal.SIGUSR1, signal.SIGUSR2, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
    signal.signal(sig, signal.SIG_IGN)
woken, wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
signal.set_wakeup_fd(wake)
signal.signal(signal.SIGCHLD, lambda *_: None)
ready = os.open(os.devnull, os.O_WRONLY)
os.write(1, b"1")  # named, its signals set: the worker may go on
os.dup2(ready, 1)
worker = int(sys.argv[1])
poller = select.poll()
poller.register(worker, select.POLLIN)
poller.register(woken, select.POLLIN)
while True:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    if any(fd == worker for fd, _ in poller.poll()):
        os._exit(0)
    try:
        os.read(woken, 4096)
    except BlockingIOError:
        pass
"""


@dataclass(frozen=True)
class ChildNamespace:
    """How this process's children die with it: `pid_namespace` (each actor started in
    one whose init exits with this process), or `parent_death_signal` alone, with why."""

    mode: str
    detail: str
    init: subprocess.Popen[bytes] | None = None

    @property
    def held(self) -> bool:
        return self.mode == "pid_namespace"


_held: ChildNamespace | None = None
_held_lock = threading.Lock()
_lost_said = threading.Event()


@functools.cache
def loaded_libc() -> ctypes.CDLL:
    """The C library, loaded once in this process: a child between fork and exec only
    calls it (loading it there could wait forever on a lock another thread held at the
    fork)."""
    return ctypes.CDLL(None, use_errno=True)


def _setns(libc: ctypes.CDLL, fd: int) -> None:
    if libc.setns(fd, CLONE_NEWPID) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns(CLONE_NEWPID): {os.strerror(errno)}")


def _pid_1_of_a_new_namespace(pid: int) -> bool:
    """Whether `pid` is the init (pid 1) of a pid namespace below this process's."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            numbers = line.split()[1:]
            return len(numbers) >= 2 and numbers[-1] == "1"
    return False


def hold_children_in_pid_namespace(*, die_with_thread: bool = True) -> ChildNamespace:
    """Make a pid namespace for this process's actors, its init a tiny process that
    exits when this process does; `start_in_namespace` starts a child there.

    Needs root (CAP_SYS_ADMIN). Where the kernel refuses, or the init cannot start,
    children are started as before (with their parent-death signal alone) and the answer
    says why. `die_with_thread`: the init also dies with the calling thread (a worker
    process's main thread; never a pool thread that may end before the process).
    Called again, it answers what the first call did.
    """
    global _held
    with _held_lock:
        if _held is None:
            _held = _make_namespace(die_with_thread)
        return _held


def _make_namespace(die_with_thread: bool) -> ChildNamespace:
    if os.geteuid() != 0:
        return ChildNamespace("parent_death_signal", "not root: a pid namespace needs root")
    libc = loaded_libc()
    own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    if libc.unshare(CLONE_NEWPID) != 0:
        errno = ctypes.get_errno()
        os.close(own)
        return ChildNamespace(
            "parent_death_signal", f"unshare(CLONE_NEWPID) refused: {os.strerror(errno)}"
        )
    init: subprocess.Popen[bytes] | None = None
    try:
        pidfd = os.pidfd_open(os.getpid())
        flag = str(int(die_with_thread))
        argv = [sys.executable, "-I", "-S", "-c", INIT_PROGRAM, str(pidfd), flag]
        try:
            init = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                pass_fds=(pidfd,),
                close_fds=True,
            )
        finally:
            os.close(pidfd)
        assert init.stdout is not None
        with init.stdout:
            said = select.select([init.stdout], [], [], INIT_READY_S)[0] and init.stdout.read(1)
        if said != b"1":
            raise OSError(f"it did not say it was ready within {INIT_READY_S:.0f} s")
        if not _pid_1_of_a_new_namespace(init.pid):
            raise OSError(f"process {init.pid} is not pid 1 of a new namespace")
    except OSError as exc:
        _setns(libc, own)  # children of this thread in its own namespace again
        os.close(own)
        if init is not None:
            init.kill()
            init.wait()
        return ChildNamespace("parent_death_signal", f"its init did not start: {exc}")
    _setns(libc, own)
    os.close(own)
    return ChildNamespace(
        "pid_namespace",
        f"each actor in a pid namespace of its worker's own (init pid {init.pid})",
        init,
    )


def children_namespace() -> ChildNamespace | None:
    """What `hold_children_in_pid_namespace` did in this process (None: not called)."""
    return _held


class NamespaceLostError(RuntimeError):
    """The worker's pid namespace ended (its init was killed): nothing can start in it."""


@contextlib.contextmanager
def start_in_namespace() -> Iterator[None]:
    """Around the start of one child (a fork, no thread started inside): the child goes
    into this process's pid namespace when it holds one, else where it would anyway.

    If the namespace's init died (only a deliberate kill can end it), no process can
    start there: this worker is asked to end (SIGTERM, once: its live episodes are
    stopped and recorded as a lost worker's) and `NamespaceLostError` is raised.
    """
    held = _held
    if held is None or held.init is None:
        yield
        return
    if held.init.poll() is not None:
        if not _lost_said.is_set():
            _lost_said.set()
            os.kill(os.getpid(), signal.SIGTERM)
        raise NamespaceLostError(
            f"the worker's pid namespace ended (its init exited, {held.init.returncode}): "
            "no actor can start in it; the worker ends"
        )
    # Opened for each start (a worker holds no descriptor for it): the init is this
    # process's child, so its pid stays its own until this process reaps it.
    libc = loaded_libc()
    own = os.open("/proc/thread-self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    try:
        namespace = os.open(f"/proc/{held.init.pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(libc, namespace)
        finally:
            os.close(namespace)
        try:
            yield  # the thread goes back to its own pid namespace for its children
        finally:
            _setns(libc, own)  # (a thread cannot start threads while they would go elsewhere)
    finally:
        os.close(own)


def proc_of_the_namespace() -> Callable[[], None]:
    """The first part of a `preexec_fn` for a child started by `start_in_namespace` (run
    as root, before it changes user): a mount namespace of its own whose `/proc` shows
    the pid namespace it is in. The host's `/proc` numbers processes as the worker's
    namespace does, and bubblewrap looks its own child up in `/proc` by the pid it got;
    mounts made here never reach the host (everything below `/` is made a slave
    first). Where no namespace is held, nothing is done."""
    held = _held
    if held is None or not held.held:
        return lambda: None
    libc = loaded_libc()  # loaded here, in the parent: the child only calls it
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC

    def mount_proc() -> None:
        if (
            libc.unshare(CLONE_NEWNS) != 0
            or libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0
            or libc.mount(b"proc", b"/proc", b"proc", flags, None) != 0
        ):
            errno = ctypes.get_errno()
            raise OSError(errno, f"the namespace's /proc: {os.strerror(errno)}")

    return mount_proc
