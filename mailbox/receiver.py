"""Receive the awaited response, and notice every other response file in the inbox.

While request n is open, `inbox/resp-n.json` is claimed and parsed. Any other
`resp-<m>.json` ends the episode as a terminal protocol error, and decides nothing:
a name already claimed is a second response (`duplicate_response`); any other name
answers no open request (`unexpected_response`, e.g. m > n, a request not yet made).
After the episode is closed, `sweep_late` takes whatever still arrives as evidence.
Hidden names (a leading '.') and names that are not `resp-<n>.json` are ignored.

Every file taken goes to the private directory: the decision under its inbox name,
anything else under `strays/`.

The inbox is listed and claimed from through the endpoint's held descriptor, and every
look first checks that the endpoint is as created: a moved, replaced, removed or
re-permissioned endpoint root, `outbox/` or `inbox/` is `endpoint_tampered`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .claim import Claimed, claim_from
from .endpoint import Endpoint, held_endpoint
from .held_directories import tampered
from .parser import ActionLimits, ParseOutcome, ProtocolError, ProtocolReason, parse_response
from .watcher import InboxWatcher

# A listing refused for these reasons means the inbox is not what it was made to be.
_LISTING_REFUSED = frozenset({errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.ENOENT})
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


def _is_under(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


class ResponseReceiver:
    def __init__(self, endpoint: Endpoint, private_dir: Path, watcher: InboxWatcher) -> None:
        if _is_under(private_dir, endpoint.mailbox_root):
            raise ValueError("private evidence must live outside the mailbox root")
        self.endpoint = held_endpoint(endpoint)
        self.dirs = self.endpoint.held
        self.private_dir = private_dir
        self.watcher = watcher
        self._claimed: set[int] = set()
        # Files judged but left in the inbox (symlinks, directories...), by inode.
        self._left: set[tuple[str, int]] = set()
        self._strays = 0

    def _responses(self) -> list[tuple[int, str]] | ProtocolError:
        """Response names in the inbox, by sequence, leaving out those already judged."""
        problem = self.dirs.problem()
        if problem is not None:
            return tampered(problem)
        inbox_fd = self.dirs.inbox_fd
        found: list[tuple[int, str]] = []
        try:
            with os.scandir(inbox_fd) as entries:
                for entry in entries:
                    sequence = response_sequence(entry.name)
                    if sequence is None:
                        continue
                    try:
                        inode = entry.stat(follow_symlinks=False).st_ino
                    except OSError:
                        continue  # gone again since the listing: nothing to judge
                    if (entry.name, inode) not in self._left:
                        found.append((sequence, entry.name))
        except OSError as exc:
            message = f"inbox/ cannot be listed: {exc.strerror}"
            if exc.errno in _LISTING_REFUSED:
                return tampered(message)
            return ProtocolError(ProtocolReason.UNREADABLE, message)
        return sorted(found)

    def _unless_tampered(self, outcome: ParseOutcome) -> ParseOutcome:
        """Tampering seen after a claim decides over its outcome (the evidence is kept)."""
        problem = self.dirs.problem()
        return outcome if problem is None else tampered(problem)

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
            st = os.stat(name, dir_fd=self.dirs.inbox_fd, follow_symlinks=False)
            self._left.add((name, st.st_ino))

    def _take_stray(self, kind: StrayKind, sequence: int, name: str) -> StrayResponse:
        self._strays += 1
        evidence = self.private_dir / "strays" / f"{self._strays:03d}-{kind}-{name}"
        claimed = claim_from(self.dirs.inbox_fd, name, evidence)
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
        return self._judge(found, sequence, request_id, limits)

    def try_receive(self, sequence: int, request_id: str, limits: ActionLimits) -> Reception | None:
        """`receive` without waiting: None if nothing is in the inbox yet."""
        found = self.watcher.poll(lambda: self._look(sequence))
        return None if found is None else self._judge(found, sequence, request_id, limits)

    def _judge(
        self, found: _Sighting, sequence: int, request_id: str, limits: ActionLimits
    ) -> Reception:
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
        claimed = claim_from(self.dirs.inbox_fd, name, self.private_dir / name)
        if isinstance(claimed, ProtocolError):
            self._leave(name)
            return Reception(outcome=self._unless_tampered(claimed), name=name)
        self._claimed.add(sequence)
        outcome = parse_response(claimed.data, expected_request_id=request_id, limits=limits)
        return Reception(outcome=self._unless_tampered(outcome), name=name, claimed=claimed)

    def sweep_late(self) -> list[StrayResponse]:
        """After the episode closed: take every response file still arriving, as evidence.

        Changes no decision; call it after publishing the closed notice, and again once
        the actor has stopped.
        """
        found = self._responses()
        if isinstance(found, ProtocolError):
            return []
        return [self._take_stray("late", sequence, name) for sequence, name in found]
