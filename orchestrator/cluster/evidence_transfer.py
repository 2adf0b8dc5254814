"""Moves a finished attempt's evidence from a worker's staging folder to the driver's run.

It is sent file by file in bounded chunks and written with the run directory's atomic
rules, the result last (an attempt is complete only once the driver wrote its result).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from mailroom.mailbox.publish import publish_bytes
from mailroom.orchestrator.cluster.messages import EventLines, EvidenceChunk
from mailroom.orchestrator.records.layout import RESULT_FILE, AttemptPaths, split_attempt_id
from mailroom.orchestrator.records.private import append_private_lines, make_private_dir
from mailroom.orchestrator.records.run_directory import RunDirectory

CHUNK_BYTES = 4 << 20
MAX_DEPTH = 3


class EvidencePathError(ValueError):
    """A name the driver will not write under its run directory."""


def attempt_chunks(directory: Path, attempt_id: str) -> Iterator[EvidenceChunk]:
    """Every file of an attempt's evidence, the result last; hidden names (a publish's
    temporary files) are left out."""
    files = sorted(
        p
        for p in directory.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and not any(part.startswith(".") for part in p.relative_to(directory).parts)
    )
    result = AttemptPaths(directory).result
    if result in files:
        files.remove(result)
        files.append(result)
    for path in files:
        name = path.relative_to(directory).as_posix()
        data = path.read_bytes()
        if not data:
            yield EvidenceChunk(attempt_id, name, b"", final=True)
            continue
        for start in range(0, len(data), CHUNK_BYTES):
            end = start + CHUNK_BYTES
            yield EvidenceChunk(attempt_id, name, data[start:end], final=end >= len(data))


def checked_name(attempt_id: str, path: str | None = None) -> PurePosixPath:
    """`attempt_id[/path]` as a relative path under `episodes/`, or `EvidencePathError`."""
    parsed = split_attempt_id(attempt_id)
    if parsed is None or "/" in attempt_id or attempt_id.startswith("."):
        raise EvidencePathError(f"{attempt_id!r} is not an attempt id")
    if path is None:
        return PurePosixPath(attempt_id)
    relative = PurePosixPath(path)
    parts = relative.parts
    bad = (
        relative.is_absolute()
        or not parts
        or len(parts) > MAX_DEPTH
        or any(p in ("", ".", "..") or p.startswith(".") or "\\" in p for p in parts)
    )
    if bad:
        raise EvidencePathError(f"{path!r} is not a file name of an attempt's evidence")
    return PurePosixPath(attempt_id, *parts)


class DriverEvidence:
    """The driver's side: mirrored event lines as they come, then each finished
    attempt's files."""

    def __init__(self, run: RunDirectory) -> None:
        self.run = run
        self._open: dict[tuple[str, str], list[bytes]] = {}
        self._made: set[Path] = set()  # attempt folders made already
        self._refused: dict[str, str] = {}  # attempt id: why a file of it was refused

    def events(self, message: EventLines) -> None:
        """Append mirrored lines to the attempt's log (fsynced when the worker waits)."""
        directory = self.run.episodes / checked_name(message.attempt_id)
        if directory not in self._made:
            make_private_dir(directory)
            self._made.add(directory)
        append_private_lines(
            AttemptPaths(directory).events, message.lines, durable=message.token is not None
        )

    def chunk(self, chunk: EvidenceChunk) -> bool:
        """Take one chunk; True once it completed the attempt's result. Once a chunk of
        an attempt is refused, so is every later one: its result is never written, and
        the attempt is recorded lost rather than complete without that file."""
        earlier = self._refused.get(chunk.attempt_id)
        if earlier is not None:
            raise EvidencePathError(f"{chunk.attempt_id}: a file of it was refused: {earlier}")
        try:
            return self._take(chunk)
        except EvidencePathError as exc:
            self._refused[chunk.attempt_id] = str(exc)
            raise

    def refusal(self, attempt_id: str) -> str | None:
        """Why a file of the attempt's evidence was refused, if one was."""
        return self._refused.get(attempt_id)

    def _take(self, chunk: EvidenceChunk) -> bool:
        name = checked_name(chunk.attempt_id, chunk.path)
        key = (chunk.attempt_id, chunk.path)
        self._open.setdefault(key, []).append(chunk.data)
        if not chunk.final:
            return False
        data = b"".join(self._open.pop(key))
        target = self.run.episodes / name
        for parent in reversed(target.relative_to(self.run.root).parents[:-1]):
            make_private_dir(self.run.root / parent)
        is_result = chunk.path == RESULT_FILE
        if is_result and any(a == chunk.attempt_id for a, _ in self._open):
            raise EvidencePathError(f"{chunk.attempt_id}: its result came before its files")
        publish_bytes(target, data, durable=is_result)
        return is_result

    def discard(self, attempt_id: str) -> None:
        """Forget what came of an attempt whose worker was lost mid-transfer."""
        for key in [k for k in self._open if k[0] == attempt_id]:
            del self._open[key]
