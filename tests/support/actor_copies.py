"""A test actor as it is copied out of the project for a sandbox (tests/conftest.py's
`copied_actor`): a standalone program.

A sandbox is handed the one file an actor's command names, copied in at its path, never
the folder beside it. An actor that imports the mailbox loop the test actors share
(`actors/actor_mailbox.py`) is therefore copied with that module's code written in
place of its import; any other actor is copied byte for byte.
"""

from __future__ import annotations

from pathlib import Path

ACTORS = Path(__file__).resolve().parent / "actors"
SHARED = ACTORS / "actor_mailbox.py"
SHARED_IMPORT = "from actor_mailbox import "
FUTURE = "from __future__ import annotations\n"


def standalone_actor(source: Path) -> bytes:
    """The program at `source` as a file that stands alone: its one-line import of the
    shared mailbox loop replaced by that module's code (all that follows its
    `from __future__` line)."""
    program = source.read_bytes()
    if source.suffix != ".py" or SHARED_IMPORT.encode() not in program:
        return program
    lines = program.decode("utf-8").splitlines(keepends=True)
    [at] = [i for i, line in enumerate(lines) if line.startswith(SHARED_IMPORT)]
    imported = lines[at].strip()
    assert "(" not in imported, f"{source}: import the shared loop on one line"
    _, found, code = SHARED.read_text(encoding="utf-8").partition(FUTURE)
    assert found, f"{SHARED}: its code follows a {FUTURE.strip()!r} line"
    lines[at] = f"# {SHARED.name}, written in place of `{imported}`:{code}"
    return "".join(lines).encode("utf-8")
