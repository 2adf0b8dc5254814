"""What an actor must never see: the evaluator's paths, and the refusal of any path that
is, holds or lies inside one of them.

The project, the Python environment and its packages, each benchmark family's private
folders, the run directory and the mailbox root are hidden from every actor; the
evaluator's home is never shown whole. A path the sandbox would show (a declared
read-only path, a file the actor command names) is checked against them here, as named
and where it leads; what of them lies inside a bound system folder the sandbox masks
(`sandbox.py`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import site
import sys
from collections.abc import Iterable
from pathlib import Path

from mailroom.checkout import CHECKOUT
from mailroom.orchestrator.actors.confinement import ConfinementError
from mailroom.orchestrator.families.packages import private_modules
from mailroom.orchestrator.families.registry import private_paths


class SandboxPathError(ConfinementError):
    """A path the actor would see is, holds or lies inside something of the evaluator."""


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
    paths: list[Path] = [CHECKOUT, Path(sys.prefix), Path(sys.exec_prefix)]
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
