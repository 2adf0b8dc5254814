"""An actor command made ready for its sandbox: where its programs are found, the
interpreters it names, the files it names checked, and a profile's programs copied in.

A bare command name is found on the actor's PATH (the system's folders, the program
folders of the declared read-only paths and of the agent CLI installation); a named file
is seen at its own path inside a declared read-only path, or copied in at each start
(a profile's own under `/opt/actor`); a script's `#!` interpreter must exist inside too.
`{python}` is the system's interpreter, never the evaluator's environment.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mailroom.orchestrator.actors.confinement import ConfinementError
from mailroom.orchestrator.actors.hidden_paths import SandboxPathError, refuse_private

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
PROGRAMS_INSIDE = Path("/opt/actor")
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
