"""The actor's sandbox: bubblewrap, a read-only minimal system, its endpoint, nothing else.

Each spawned actor runs under `bwrap` in its own user, pid, mount, network, ipc and uts
namespaces (`--unshare-all`), as uid 1000 without capabilities and with `NoNewPrivs`,
under a system-call filter (`seccomp.py`: no tracing, keyrings, io_uring, BPF), killed
with the worker (`--die-with-parent`); when its pid 1 ends, every process of the
namespace ends, double-forked children included. Its root is an empty, read-only
tmpfs holding only:

- `/usr` (and the `/bin`, `/lib`, `/lib64`, `/sbin` links) and the few `/etc` files
  that interpreters and the C library read, read-only, with any evaluator path that
  lies inside them (a site-packages, the project) masked by an empty tmpfs;
- its own `/proc`, a read-only `/dev` with a size-limited `/dev/shm`, and a
  size-limited `/tmp` (run as root: folders of the actor's own bounded tmpfs, with its
  `scratch/`: `actor_filesystem.py`);
- its endpoint at the path the instructions name: the endpoint folder and `outbox/`
  read-only, `inbox/` and `scratch/` writable, bound from the orchestrator's held
  descriptors (never a path the actor could have replaced);
- the files its command names, at their own paths, and the read-only paths the profile
  or `--actor-path` declares; a profile's own programs copied in under `/opt/actor`.

When the orchestrator runs as root, bubblewrap itself starts as a fresh unprivileged
uid and gid (one per episode, with no passwd entry and no other membership): the
actor's files belong to it outside, it owns nothing of the evaluator, and after the
episode no process of that uid may remain (`leftover_processes`). The uid is reserved
on the machine from its draw until that sweep is done (`uid_reservation.py`), so no
other live sandbox has it. The endpoint lets that group in
(`create_endpoint(actor_gid=...)`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import signal
import site
import stat
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mailroom.orchestrator.actors.confinement import ConfinementError, ConfinementSettings
from mailroom.orchestrator.actors.profiles import REPO_ROOT
from mailroom.orchestrator.actors.seccomp import SeccompUnavailableError, filter_program
from mailroom.orchestrator.actors.uid_reservation import (
    RESERVATIONS,
    UidReservation,
    reserve_uid,
)
from mailroom.orchestrator.families.packages import private_modules
from mailroom.orchestrator.families.registry import private_paths

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
INSIDE_UID = 1000
INSIDE_GID = 1000
INSIDE_HOSTNAME = "sandbox"
PROGRAMS_INSIDE = Path("/opt/actor")
# Fresh outer ids: above systemd's container range (524288-1879048191), in the range it
# leaves unassigned, far from any real account or subordinate-id range.
OUTER_ID_BASE = 0x70000000
OUTER_ID_SPAN = 1 << 24
SYSTEM_LINKS = (("usr/bin", "/bin"), ("usr/sbin", "/sbin"), ("usr/lib", "/lib"))
OPTIONAL_LINKS = (("usr/lib64", "/lib64"), ("usr/lib32", "/lib32"), ("usr/libx32", "/libx32"))
# What the dynamic loader, interpreters and the C library read from /etc.
ETC_ENTRIES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "mime.types",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "python3",
    "python3.11",
    "python3.12",
    "python3.13",
)
# Name resolution, only with the host network.
NETWORK_ETC_ENTRIES = ("resolv.conf", "hosts", "host.conf", "gai.conf", "services", "protocols")


class SandboxUnavailableError(ConfinementError):
    """The sandbox cannot start on this machine (no bubblewrap, no user namespaces)."""


class SandboxPathError(ConfinementError):
    """A path the actor would see is, holds or lies inside something of the evaluator."""


@dataclass(frozen=True)
class SandboxTool:
    path: str
    version: str

    def document(self) -> dict[str, str]:
        return {"name": "bubblewrap", "path": self.path, "version": self.version}


def find_tool() -> SandboxTool:
    """bubblewrap on the system PATH, or why not."""
    path = shutil.which("bwrap", path=SAFE_PATH + ":/usr/local/sbin:/usr/sbin:/sbin")
    if path is None:
        raise SandboxUnavailableError(
            "bubblewrap (bwrap) is not installed: install the Debian package 'bubblewrap' "
            "(make does it), or pass --confinement none to run actors unconfined"
        )
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailableError(f"{path} --version failed: {exc}") from exc
    version = out.stdout.strip().removeprefix("bubblewrap ").strip() or "unknown"
    return SandboxTool(path, version)


@dataclass(frozen=True)
class OuterIdentity:
    """The uid and gid bubblewrap starts as outside (None: the evaluator's own).

    A fresh one is reserved on this machine (`uid_reservation.py`) until `release`,
    which comes after its sandbox stopped and the sweep of its leftover processes.
    """

    uid: int | None
    gid: int | None
    reservation: UidReservation | None = field(default=None, compare=False, repr=False)

    @classmethod
    def fresh(
        cls,
        *,
        reservations: Path = RESERVATIONS,
        base: int = OUTER_ID_BASE,
        span: int = OUTER_ID_SPAN,
    ) -> OuterIdentity:
        if os.geteuid() != 0:
            return cls(None, None)  # an unprivileged evaluator cannot change user
        held = reserve_uid(base, span, clear=cleared_of_leftovers, directory=reservations)
        return cls(held.uid, held.uid, held)

    def release(self) -> None:
        """Give the uid back (nothing for the evaluator's own); again is harmless."""
        if self.reservation is not None:
            self.reservation.release()


def leftover_processes(uid: int) -> list[int]:
    """Processes of `uid` still alive (zombies excluded), from /proc."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        uids = fields.get("Uid", "").split()
        if uids and int(uids[0]) == uid and not fields.get("State", "").startswith("Z"):
            found.append(int(entry.name))
    return found


def kill_leftovers(uid: int, settle_s: float = 2.0) -> int:
    """Processes of `uid` still alive `settle_s` after its sandbox ended, killed now.

    The kernel ends a pid namespace's processes when its first process dies, but not
    at once: what remains after the settling time escaped the namespace, and is counted.
    Each is signalled through a pidfd after its owner is checked again, so a recycled pid
    is never hit.
    """
    deadline = time.monotonic() + settle_s
    while (pids := leftover_processes(uid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in pids:
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(pid)
            try:
                if pid in leftover_processes(uid):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            finally:
                os.close(pidfd)
    return len(pids)


def cleared_of_leftovers(uid: int, settle_s: float = 2.0) -> bool:
    """Whether no process of `uid` is left, once what there was has been killed and given
    `settle_s` to go: a newly reserved uid may still have a process of the sandbox of a
    worker that was killed while it held it."""
    if not leftover_processes(uid):
        return True
    kill_leftovers(uid, settle_s=0.0)
    deadline = time.monotonic() + settle_s
    while leftover_processes(uid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).resolve()
    return Path(spec.origin).resolve().parent if spec.origin else None


def evaluator_paths(*also: Path) -> tuple[Path, ...]:
    """What an actor must never see: the project, the Python environment and its
    packages (LIBERO's BDDL files among them), each benchmark family's private folders (a
    declared LIBERO-Para copy), and `also`
    (the run directory, the mailbox root). The evaluator's home is never bound whole
    either (`refuse_private`); a file or folder inside it may be."""
    paths: list[Path] = [REPO_ROOT, Path(sys.prefix), Path(sys.exec_prefix)]
    with contextlib.suppress(AttributeError):
        paths += [Path(p) for p in site.getsitepackages()]
    with contextlib.suppress(AttributeError):
        paths.append(Path(site.getusersitepackages()))
    paths += [p for p in map(_package_dir, private_modules()) if p is not None]
    paths += private_paths()  # each family's further folders (a declared local copy)
    paths += also
    unique: dict[Path, None] = {}
    for path in paths:
        with contextlib.suppress(OSError):
            unique[Path(os.path.realpath(path))] = None
    return tuple(unique)


def _overlaps(path: Path, private: Path) -> bool:
    return path == private or path.is_relative_to(private) or private.is_relative_to(path)


def refuse_private(path: Path, private: Iterable[Path], what: str) -> None:
    """Raise `SandboxPathError` when `path` is, holds or lies inside a private path, or
    is or holds the evaluator's home."""
    home = Path(os.path.realpath(Path.home()))
    # The path as named and where it leads: a link into the evaluator is refused too.
    for real in dict.fromkeys([Path(os.path.abspath(path)), Path(os.path.realpath(path))]):
        if home.is_relative_to(real):
            raise SandboxPathError(
                f"{what} {path} is or holds the evaluator's home {home}, which an actor must "
                "never see: name a folder inside it instead"
            )
        _refuse_overlap(path, real, private, what)


def _refuse_overlap(path: Path, real: Path, private: Iterable[Path], what: str) -> None:
    for secret in private:
        if _overlaps(real, secret):
            relation = (
                "is"
                if real == secret
                else ("holds" if secret.is_relative_to(real) else "lies inside")
            )
            raise SandboxPathError(
                f"{what} {path} {relation} {secret}, which an actor must never see "
                "(the project, the Python environment, the LIBERO package, the run directory "
                "or the mailbox root): copy what the actor needs elsewhere"
            )


SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
COPY_CAP_BYTES = 64 << 20  # a named file larger than this is refused: bind its folder


def inside_python() -> str:
    """The interpreter `{python}` names inside the sandbox: the system's (Debian's
    `/usr/bin/python3`), never the evaluator's environment with its packages."""
    for candidate in SYSTEM_PYTHONS:
        if os.access(candidate, os.X_OK):
            return candidate
    raise ConfinementError(
        "no system Python (/usr/bin/python3) for {python} inside the sandbox: install "
        "Debian's python3, or name another interpreter under /usr"
    )


def unreachable_part(path: Path, *, read: bool = True) -> Path | None:
    """The first part of `path` a fresh unprivileged user cannot pass (or, at the end and
    with `read`, read), or None: such a user is in no group, so only others' bits count."""
    real = Path(os.path.realpath(path))
    parts = [*reversed(real.parents), real]
    for part in parts:
        try:
            mode = part.stat().st_mode
        except OSError:
            return part
        last = part == real
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return part
        if last and read and not mode & stat.S_IROTH:
            return part
    return None


def refuse_unreachable(path: Path, what: str, *, read: bool = True) -> None:
    if os.geteuid() != 0:
        return  # the sandbox runs as the evaluator's own user, who reaches it
    blocked = unreachable_part(path, read=read)
    if blocked is not None:
        raise SandboxPathError(
            f"{what} {path} cannot be reached by the sandbox's unprivileged user: {blocked} "
            f"is not {'readable and ' if read else ''}searchable by others "
            f"(chmod o+{'r' if read else ''}x, or choose another place)"
        )


# Under a folder named node_modules, as npm laid it out: launchers look for their native
# binaries there.
INSTALLATION_INSIDE = Path("/opt/agent-clis/node_modules")
# Folders of a declared path that hold programs, and so go on the actor's PATH: the
# folder itself, bin/, and npm's .bin/.
PROGRAM_FOLDERS = (".", "bin", ".bin")


def _holds_programs(folder: Path) -> bool:
    try:
        return any(entry.is_file() and os.access(entry, os.X_OK) for entry in folder.iterdir())
    except OSError:
        return False


@dataclass(frozen=True)
class ProgramSearch:
    """Where the actor's programs are found: (folder outside, the same folder inside)
    pairs in PATH order. The system's folders first, then the program folders of each
    declared read-only path, then the agent CLI installation's (bound elsewhere inside)."""

    folders: tuple[tuple[str, str], ...]

    @classmethod
    def of(
        cls,
        read_only_paths: Sequence[str] = (),
        installation: Path | None = None,
        *,
        installation_inside: Path | None = INSTALLATION_INSIDE,
    ) -> ProgramSearch:
        folders = [(p, p) for p in SAFE_PATH.split(":")]
        bound = [(Path(p), Path(p)) for p in read_only_paths]
        if installation is not None:
            bound.append((installation, installation_inside or installation))
        for host, inside in bound:
            for sub in PROGRAM_FOLDERS:
                if (host / sub).is_dir() and _holds_programs(host / sub):
                    pair = (os.path.normpath(host / sub), os.path.normpath(inside / sub))
                    if pair not in folders:
                        folders.append(pair)
        return cls(tuple(folders))

    @property
    def inside_path(self) -> str:
        """The actor's PATH."""
        return ":".join(dict.fromkeys(inside for _, inside in self.folders))

    def find(self, name: str) -> tuple[Path, str] | None:
        """A bare command name as the actor's PATH finds it: (outside, inside)."""
        for host, inside in self.folders:
            candidate = Path(host) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate, f"{inside}/{name}"
        return None

    def visible(self, path: Path, read_only_paths: Sequence[str]) -> bool:
        """Whether `path` (outside) is visible at the same path inside the sandbox."""
        roots = ("/usr", "/bin", "/lib", "/lib64", "/sbin", *read_only_paths)
        return any(Path(os.path.abspath(path)).is_relative_to(r) for r in roots)


@dataclass(frozen=True)
class ActorProgram:
    """An actor command made ready for its sandbox: argv with `{endpoint}` still a field,
    every file it names absolute, the files copied in at each start (host path, path
    inside), and the actor's PATH."""

    argv: tuple[str, ...]
    copied_files: tuple[tuple[str, str], ...] = ()
    path: str = SAFE_PATH
    installation: str | None = None


def _is_field(arg: str) -> bool:
    return "{endpoint}" in arg or arg == "{python}"


def _check_interpreter(
    program: Path, search: ProgramSearch, read_only_paths: Sequence[str]
) -> None:
    """A script's `#!` interpreter must exist inside the sandbox too (`/usr/bin/env X`:
    X on the actor's PATH), or the actor would fail at its first episode."""
    try:
        with program.open("rb") as handle:
            head = handle.read(256)
    except OSError:
        return
    if not head.startswith(b"#!"):
        return
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return
    interpreter = Path(words[0])
    if not (interpreter.exists() and search.visible(interpreter, read_only_paths)):
        raise ConfinementError(
            f"the actor program {program} is run by {interpreter}, which the sandbox does not "
            "have: install it under /usr, or declare its folder with --actor-path"
        )
    named = words[1] if interpreter.name == "env" and len(words) > 1 else "-"
    if not named.startswith("-") and search.find(named) is None:
        raise ConfinementError(
            f"the actor program {program} is run by {words[1]!r}, which is not on the "
            f"sandbox's PATH ({search.inside_path}): install it (e.g. Debian's package) "
            "or declare its folder with --actor-path"
        )


def _names_a_file(candidate: Path) -> bool:
    """Whether an argument names a file; an argument that cannot be a path (a program
    text passed with -c, say, with a part longer than a file name may be) does not."""
    try:
        return candidate.is_file()
    except OSError:
        return False


def prepare_program(
    template: Sequence[str],
    *,
    cwd: Path,
    profile_dir: Path | None,
    private: Sequence[Path],
    read_only_paths: Sequence[str] = (),
    installation: Path | None = None,
) -> ActorProgram:
    """Check and rewrite an actor command for the sandbox, or refuse it clearly.

    An argument that names an existing file (relative to `cwd`) is a named file. One
    inside a declared read-only path is seen there, as it is (never copied, whatever its
    size). Any other is copied in read-only, at each episode's start, at its absolute
    path, which replaces it in argv (copied, not bound: no folder above it need be open
    to the sandbox's user); a file of the profile's own folder is copied in under
    `/opt/actor` (the folder lies in the project). A bare command name must be found on
    the actor's PATH: the system's folders, the program folders of the declared
    read-only paths and of the agent CLI installation, the same PATH the actor gets.
    """
    if not template:
        raise ConfinementError("the actor command is empty")
    search = ProgramSearch.of(read_only_paths, installation)
    argv: list[str] = []
    copied: list[tuple[str, str]] = []
    for index, arg in enumerate(template):
        if _is_field(arg):
            argv.append(arg)
            continue
        candidate = Path(os.path.abspath(cwd / arg)) if arg else None
        if candidate is not None and ("/" in arg or index > 0) and _names_a_file(candidate):
            real = Path(os.path.realpath(candidate))
            if search.visible(candidate, read_only_paths) and search.visible(real, read_only_paths):
                if candidate.is_relative_to("/usr") or real.is_relative_to("/usr"):
                    refuse_private(candidate, private, "the actor command names a file that")
                if index == 0:
                    _check_interpreter(real, search, read_only_paths)
                argv.append(str(candidate))  # seen inside at its own path
                continue
            if profile_dir is not None and real.is_relative_to(profile_dir.resolve()):
                inside = PROGRAMS_INSIDE / real.relative_to(profile_dir.resolve())
                if index == 0:
                    _check_interpreter(real, search, read_only_paths)
                copied.append((str(real), str(inside)))
                argv.append(str(inside))
                continue
            refuse_private(candidate, private, "the actor command names a file that")
            if real.stat().st_size > COPY_CAP_BYTES:
                raise SandboxPathError(
                    f"the actor command names {candidate}, larger than "
                    f"{COPY_CAP_BYTES >> 20} MiB: declare its folder with --actor-path"
                )
            if index == 0:
                _check_interpreter(real, search, read_only_paths)
            copied.append((str(real), str(candidate)))
            argv.append(str(candidate))
            continue
        if index == 0 and "/" not in arg:
            found = search.find(arg)
            if found is None:
                raise ConfinementError(
                    f"the actor command {arg!r} is not on the sandbox's PATH "
                    f"({search.inside_path}): name it by its full path and declare its "
                    "installation with --actor-path"
                )
            _check_interpreter(Path(os.path.realpath(found[0])), search, read_only_paths)
        elif index == 0:
            raise ConfinementError(
                f"the actor command {arg} is not visible inside the sandbox: declare the "
                "folder that holds it with --actor-path"
            )
        argv.append(arg)
    return ActorProgram(
        tuple(argv),
        tuple(dict.fromkeys(copied)),
        path=search.inside_path,
        installation=None if installation is None else str(installation),
    )


def system_view() -> list[str]:
    """`/usr` read-only and the usual links into it (the loader lives behind /lib64)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for target, link in SYSTEM_LINKS:
        args += ["--symlink", target, link]
    for target, link in OPTIONAL_LINKS:
        if Path("/" + target).exists():
            args += ["--symlink", target, link]
    return args


@dataclass
class SandboxCommand:
    """One episode's bubblewrap command line and the descriptors it must inherit."""

    argv: list[str]
    pass_fds: list[int] = field(default_factory=list)

    def close(self) -> None:
        """Close the parent's copies of the passed descriptors (after the spawn)."""
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pass_fds = []


def _data_fd(data: bytes) -> int:
    fd = os.memfd_create("sandbox-data", os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class Sandbox:
    """Builds the bubblewrap command of each episode of one launch."""

    def __init__(
        self,
        tool: SandboxTool,
        settings: ConfinementSettings,
        private: Sequence[Path],
        *,
        tmp_size_mb: int = 1024,
    ) -> None:
        if not settings.confined:
            raise ValueError("a Sandbox is for confinement mode 'sandbox'")
        for path in settings.read_only_paths:
            if not Path(path).exists():
                raise ConfinementError(f"the declared read-only path {path} does not exist")
            refuse_private(Path(path), private, "the declared read-only path")
            refuse_unreachable(Path(path), "the declared read-only path")
        self.tool = tool
        self.settings = settings
        self.private = tuple(private)
        self.tmp_size_mb = tmp_size_mb

    def _system(self) -> list[str]:
        args = system_view()
        entries = ETC_ENTRIES + (NETWORK_ETC_ENTRIES if self.settings.network == "host" else ())
        for name in entries:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        # Mask what of the evaluator lies inside a bound system folder (a declared
        # read-only path that holds any of it was refused).
        bound = [Path("/usr"), *(Path(f"/etc/{n}") for n in entries)]
        masks: set[Path] = set()
        for secret in self.private:
            if any(secret.is_relative_to(b) for b in bound) and secret.exists():
                masks.add(secret)
        for mask in sorted(masks):
            if mask.is_dir():
                args += ["--tmpfs", str(mask)]
            else:
                args += ["--ro-bind", "/dev/null", str(mask)]
        return args

    def command(
        self,
        program: ActorProgram,
        argv: Sequence[str],
        *,
        endpoint_root: Path,
        held_dirs: dict[str, int],
        scratch: Path,
        writable: Mapping[str, int] | None = None,
        own_network: bool = False,
    ) -> SandboxCommand:
        """bwrap's argv for `argv` (the rendered program) in a fresh sandbox.

        `writable`: the descriptor numbers of the actor's bounded tmpfs folders
        (`actor_filesystem.py`: scratch, tmp, dev-shm), which the command takes (it
        closes them after the spawn); without them /tmp and /dev/shm are bubblewrap's
        size-limited tmpfs and scratch/ is the endpoint's own folder. `own_network`: the
        actor's child makes its network namespace itself (the `gateway` network), which
        bubblewrap keeps; a gateway network without it is refused, never the host's."""
        if self.settings.network == "gateway" and not own_network:
            raise ConfinementError(
                "the gateway network needs the actor's own network namespace "
                "(actor_network.py); refused rather than sharing the host's"
            )
        cmd = SandboxCommand([self.tool.path, "--unshare-all", "--unshare-user"])
        cmd.pass_fds.extend((writable or {}).values())
        try:
            self._fill(cmd, program, argv, endpoint_root, held_dirs, scratch, writable or {})
        except BaseException:
            cmd.close()
            raise
        return cmd

    def _fill(
        self,
        cmd: SandboxCommand,
        program: ActorProgram,
        argv: Sequence[str],
        endpoint_root: Path,
        held_dirs: dict[str, int],
        scratch: Path,
        writable: Mapping[str, int],
    ) -> None:
        a = cmd.argv
        # The host's network; or, for the gateway, the namespace the actor's child made
        # with nothing but its loopback and the gateway's socket (`actor_network.py`).
        if self.settings.network in ("host", "gateway"):
            a.append("--share-net")
        a += ["--die-with-parent", "--new-session", "--disable-userns"]
        a += ["--uid", str(INSIDE_UID), "--gid", str(INSIDE_GID)]
        a += ["--hostname", INSIDE_HOSTNAME]
        a += self._system()
        size = str(self.tmp_size_mb << 20)
        a += ["--proc", "/proc", "--dev", "/dev"]
        # /dev read-only but for a bounded /dev/shm; /tmp bounded like the scratch quota.
        if writable:  # folders of the actor's own tmpfs, bounded in bytes and inodes
            a += ["--bind-fd", str(writable["dev-shm"]), "/dev/shm", "--remount-ro", "/dev"]
            a += ["--bind-fd", str(writable["tmp"]), "/tmp"]
        else:
            a += ["--perms", "1777", "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
            a += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
        seccomp = _data_fd(filter_program())
        cmd.pass_fds.append(seccomp)
        a += ["--seccomp", str(seccomp)]
        passwd = f"actor:x:{INSIDE_UID}:{INSIDE_GID}:actor:{scratch}:/bin/sh\n"
        for name, text in (("passwd", passwd), ("group", f"actor:x:{INSIDE_GID}:\n")):
            fd = _data_fd(text.encode())
            cmd.pass_fds.append(fd)
            a += ["--perms", "0444", "--ro-bind-data", str(fd), f"/etc/{name}"]
        for path in self.settings.read_only_paths:
            a += ["--ro-bind", path, path]
        if program.installation is not None:
            a += ["--ro-bind", program.installation, str(INSTALLATION_INSIDE)]
        for host, inside in program.copied_files:
            fd = _data_fd(Path(host).read_bytes())
            cmd.pass_fds.append(fd)
            a += ["--perms", "0555", "--ro-bind-data", str(fd), inside]
        # The endpoint itself read-only (nothing can be made beside its folders), then
        # outbox/ read-only and inbox/, scratch/ writable over it.
        for name in ("root", "outbox", "inbox", "scratch"):
            if name == "scratch" and writable:
                fd = writable["scratch"]
            else:
                fd = os.dup(held_dirs[name])  # bwrap closes what it is given
                cmd.pass_fds.append(fd)
            flag = "--bind-fd" if name in ("inbox", "scratch") else "--ro-bind-fd"
            a += [flag, str(fd), str(endpoint_root if name == "root" else endpoint_root / name)]
        a += ["--remount-ro", "/", "--chdir", str(scratch), "--", *argv]


@functools.cache
def _probe(tool_path: str, as_root: bool) -> str | None:
    """Run `true` in a minimal sandbox, as an episode would; None, or why it failed."""
    identity = OuterIdentity.fresh() if as_root else OuterIdentity(None, None)
    argv = [
        tool_path,
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--new-session",
        "--disable-userns",
        "--uid",
        str(INSIDE_UID),
        "--gid",
        str(INSIDE_GID),
        *system_view(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        "/bin/true",
    ]
    try:
        out = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=30,
            user=identity.uid,
            group=identity.gid,
            extra_groups=[] if identity.uid is not None else None,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:
        if identity.uid is not None:
            kill_leftovers(identity.uid)
        identity.release()
    if out.returncode != 0:
        return (out.stderr.strip() or f"exit status {out.returncode}")[:500]
    return None


def probe_sandbox() -> SandboxTool:
    """The tool, once a trial sandbox has started and ended; else `SandboxUnavailableError`."""
    tool = find_tool()
    try:
        filter_program()
    except SeccompUnavailableError as exc:
        raise SandboxUnavailableError(
            f"the sandbox's system-call filter cannot be built: {exc}; pass --confinement "
            "none to run actors unconfined"
        ) from exc
    problem = _probe(tool.path, os.geteuid() == 0)
    if problem is not None:
        raise SandboxUnavailableError(
            f"a bubblewrap sandbox cannot start here ({problem}): user namespaces may be "
            "disabled; pass --confinement none to run actors unconfined"
        )
    return tool
