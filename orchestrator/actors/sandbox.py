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

Bubblewrap starts as the sandbox's outer identity (`outer_identity.py`: as root, a fresh
unprivileged uid per episode); the actor's command is prepared by `actor_program.py`;
what of the evaluator lies inside a bound system folder (`hidden_paths.py`) is masked
here. Whether a sandbox can start on this machine at all is `sandbox_probe.py`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mailroom.orchestrator.actors.actor_program import INSTALLATION_INSIDE, ActorProgram
from mailroom.orchestrator.actors.confinement import ConfinementError, ConfinementSettings
from mailroom.orchestrator.actors.hidden_paths import refuse_private
from mailroom.orchestrator.actors.outer_identity import refuse_unreachable
from mailroom.orchestrator.actors.seccomp import filter_program

INSIDE_UID = 1000
INSIDE_GID = 1000
INSIDE_HOSTNAME = "sandbox"
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


@dataclass(frozen=True)
class SandboxTool:
    """The bubblewrap a sandbox runs, as a run's manifest records it
    (`sandbox_probe.find_tool`)."""

    path: str
    version: str

    def document(self) -> dict[str, str]:
        return {"name": "bubblewrap", "path": self.path, "version": self.version}


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
