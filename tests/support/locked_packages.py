"""A pip requirements lock read as its entries: `name==version` with its sha256 hashes
(the project's lock, the packages installed alone, LeRobot's venv)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements"
# The exports' real clients' venvs (`make clients`): each its lock and the package
# installed alone beside it (lerobot; Harbor's models for inspect_scout).
LEROBOT_LOCKS = (REQUIREMENTS / "lerobot-client.txt", REQUIREMENTS / "lerobot.txt")
SCOUT_LOCKS = (REQUIREMENTS / "inspect-scout-client.txt", REQUIREMENTS / "harbor.txt")


@dataclass(frozen=True)
class Locked:
    name: str
    version: Version
    hashes: tuple[str, ...]


def parse_lock(text: str) -> dict[str, Locked]:
    """`name==version \\` lines, each followed by its `--hash=sha256:...` lines."""
    entries: list[tuple[Requirement, list[str]]] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if raw[:1].isspace():
            assert entries, f"a continuation line before any requirement: {raw!r}"
            for option in line.removesuffix("\\").split():
                assert option.startswith("--hash="), f"unexpected option in the lock: {option}"
                entries[-1][1].append(option.removeprefix("--hash="))
            continue
        requirement = Requirement(line.removesuffix("\\").strip())
        entries.append((requirement, []))
    locked: dict[str, Locked] = {}
    for requirement, hashes in entries:
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", str(requirement)
        name = canonicalize_name(requirement.name)
        assert name not in locked, f"{name} is locked twice"
        locked[name] = Locked(name, Version(specifiers[0].version), tuple(hashes))
    return locked


def read_lock(*paths: Path) -> dict[str, Locked]:
    """The entries of every file of `paths`, by canonical name."""
    found: dict[str, Locked] = {}
    for path in paths:
        entries = parse_lock(path.read_text(encoding="utf-8"))
        twice = sorted(set(found) & set(entries))
        assert not twice, f"{path.name} locks again what another file locks: {twice}"
        found.update(entries)
    return found
