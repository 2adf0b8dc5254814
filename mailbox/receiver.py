"""Receive the awaited response, and notice every other response file in the inbox.

While request n is open, `inbox/resp-n.json` is claimed and parsed. Any other
`resp-<m>.json` ends the episode as a terminal protocol error, and decides nothing:
a name already claimed is a second response (`duplicate_response`); any other name
answers no open request (`unexpected_response`, e.g. m > n, a request not yet made).
After the episode is closed, `sweep_late` takes whatever still arrives as evidence.
Hidden names (a leading '.') and names that are not `resp-<n>.json` are ignored.

Every file taken goes to the private directory: the decision under its inbox name,
anything else under `strays/`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .claim import Claimed, claim_response
from .endpoint import Endpoint
from .parser import ActionLimits, ParseOutcome, ProtocolError, ProtocolReason, parse_response
from .watcher import InboxWatcher

RESPONSE_NAME = re.compile(r"resp-([1-9][0-9]{0,17})\.json")
StrayKind = Literal["duplicate", "unexpected", "late"]


@dataclass(frozen=True)
class StrayResponse:
    """A response file that was not the one awaited, as kept in the evidence."""

    kind: StrayKind
    name: str
    sequence: int
    evidence: Path | None
    size: int | None
    sha256: str | None
    claim_error: ProtocolReason | None


@dataclass(frozen=True)
class Reception:
    """What ended a wait: the outcome, and what was taken to reach it."""

    outcome: ParseOutcome
    name: str | None
    claimed: Claimed | None = None
    stray: StrayResponse | None = None


@dataclass(frozen=True)
class Silence:
    waited_s: float


@dataclass(frozen=True)
class _Sighting:
    """A response name seen in the inbox, or why the inbox cannot be trusted."""

    sequence: int = 0
    name: str = ""
    problem: ProtocolError | None = None


def response_sequence(name: str) -> int | None:
    match = RESPONSE_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def _identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _is_under(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


class ResponseReceiver:
    def __init__(self, endpoint: Endpoint, private_dir: Path, watcher: InboxWatcher) -> None:
        if _is_under(private_dir, endpoint.mailbox_root):
            raise ValueError("private evidence must live outside the mailbox root")
        self.endpoint = endpoint
        self.private_dir = private_dir
        self.watcher = watcher
        self._inbox = _identity(os.lstat(endpoint.inbox))
        self._claimed: set[int] = set()
        # Files judged but left in the inbox (symlinks, directories...), by inode.
        self._left: set[tuple[str, int]] = set()
        self._strays = 0

    def _inbox_problem(self) -> ProtocolError | None:
        try:
            st = os.lstat(self.endpoint.inbox)
        except OSError:
            st = None
        if st is None or not stat.S_ISDIR(st.st_mode) or _identity(st) != self._inbox:
            return ProtocolError(ProtocolReason.ENDPOINT_TAMPERED, "inbox/ was removed or replaced")
        return None

    def _responses(self) -> list[tuple[int, str]] | ProtocolError:
        """Response names in the inbox, by sequence, leaving out those already judged."""
        problem = self._inbox_problem()
        if problem is not None:
            return problem
        found: list[tuple[int, str]] = []
        try:
            with os.scandir(self.endpoint.inbox) as entries:
                for entry in entries:
                    sequence = response_sequence(entry.name)
                    if sequence is None:
                        continue
                    try:
                        inode = entry.stat(follow_symlinks=False).st_ino
                    except FileNotFoundError:
                        continue  # gone again since the listing: nothing to judge
                    if (entry.name, inode) not in self._left:
                        found.append((sequence, entry.name))
        except OSError:
            return ProtocolError(ProtocolReason.ENDPOINT_TAMPERED, "inbox/ cannot be listed")
        return sorted(found)

    def _look(self, sequence: int) -> _Sighting | None:
        found = self._responses()
        if isinstance(found, ProtocolError):
            return _Sighting(problem=found)
        # Another response name wins over the awaited one: nothing runs once the
        # actor is seen to break the protocol.
        for seen, name in found:
            if seen != sequence:
                return _Sighting(seen, name)
        return _Sighting(*found[0]) if found else None

    def _leave(self, name: str) -> None:
        with contextlib.suppress(OSError):
            self._left.add((name, os.lstat(self.endpoint.inbox / name).st_ino))

    def _take_stray(self, kind: StrayKind, sequence: int, name: str) -> StrayResponse:
        self._strays += 1
        evidence = self.private_dir / "strays" / f"{self._strays:03d}-{kind}-{name}"
        claimed = claim_response(self.endpoint.inbox / name, evidence)
        if isinstance(claimed, ProtocolError):
            self._leave(name)
            return StrayResponse(kind, name, sequence, None, None, None, claimed.reason)
        digest = hashlib.sha256(claimed.data).hexdigest()
        return StrayResponse(kind, name, sequence, evidence, len(claimed.data), digest, None)

    def receive(
        self, sequence: int, request_id: str, limits: ActionLimits, timeout_s: float
    ) -> Reception | Silence:
        """Wait for `resp-<sequence>.json`; claim and judge it, or whatever came instead."""
        started = time.monotonic()
        found = self.watcher.wait_until(lambda: self._look(sequence), timeout_s)
        if found is None:
            return Silence(waited_s=time.monotonic() - started)
        if found.problem is not None:
            return Reception(outcome=found.problem, name=None)
        seen, name = found.sequence, found.name
        if seen != sequence:
            if seen in self._claimed:
                stray = self._take_stray("duplicate", seen, name)
                error = ProtocolError(
                    ProtocolReason.DUPLICATE_RESPONSE,
                    f"a second {name} after that response was already taken",
                )
            else:
                stray = self._take_stray("unexpected", seen, name)
                error = ProtocolError(
                    ProtocolReason.UNEXPECTED_RESPONSE,
                    f"{name} answers no open request (awaiting resp-{sequence}.json)",
                )
            return Reception(outcome=error, name=name, stray=stray)
        claimed = claim_response(self.endpoint.inbox / name, self.private_dir / name)
        if isinstance(claimed, ProtocolError):
            self._leave(name)
            return Reception(outcome=claimed, name=name)
        self._claimed.add(sequence)
        outcome = parse_response(claimed.data, expected_request_id=request_id, limits=limits)
        return Reception(outcome=outcome, name=name, claimed=claimed)

    def sweep_late(self) -> list[StrayResponse]:
        """After the episode closed: take every response file still arriving, as evidence.

        Changes no decision; call it after publishing the closed notice, and again once
        the actor has stopped.
        """
        found = self._responses()
        if isinstance(found, ProtocolError):
            return []
        return [self._take_stray("late", sequence, name) for sequence, name in found]
