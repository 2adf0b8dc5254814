"""Receive the awaited response, and notice every other response file in the inbox.

While request n is open, `inbox/resp-n.json` is claimed and parsed. Any other
`resp-<m>.json` ends the episode as a terminal protocol error, and decides nothing:
a name already claimed is a second response (`duplicate_response`); any other name
answers no open request (`unexpected_response`, e.g. m > n, a request not yet made).
After the episode is closed, `sweep_late` takes whatever still arrives as evidence.
Hidden names (a leading '.') and names that are not `resp-<n>.json` are ignored.

Every file taken goes to the private directory: the decision under its inbox name,
anything else under `strays/`.

A look given a deadline leaves alone every response name that arrived after it: the
request timed out, however late the look, and what came after is swept as late. When a
name arrived is what the watcher's event noted, or else (a scan found it) the file's
own status-change time (`_arrival`).

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
    # When the file judged arrived in the inbox (monotonic); None: no file was judged.
    arrived_at: float | None = None


@dataclass(frozen=True)
class Silence:
    waited_s: float


@dataclass(frozen=True)
class _Sighting:
    """A response name seen in the inbox, or why the inbox cannot be trusted."""

    sequence: int = 0
    name: str = ""
    problem: ProtocolError | None = None
    arrived_at: float | None = None


@dataclass(frozen=True)
class _Listed:
    """A response name in the inbox and its inode's status-change time (`st_ctime_ns`)."""

    sequence: int
    name: str
    changed_ns: int


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
        # When the open request's observation was published (monotonic): no response
        # counts as arrived before it.
        self.published_at = 0.0

    def _responses(self) -> list[_Listed] | ProtocolError:
        """Response names in the inbox, by sequence, leaving out those already judged."""
        problem = self.dirs.problem()
        if problem is not None:
            return tampered(problem)
        inbox_fd = self.dirs.inbox_fd
        found: list[_Listed] = []
        try:
            with os.scandir(inbox_fd) as entries:
                for entry in entries:
                    sequence = response_sequence(entry.name)
                    if sequence is None:
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # gone again since the listing: nothing to judge
                    if (entry.name, st.st_ino) not in self._left:
                        found.append(_Listed(sequence, entry.name, st.st_ctime_ns))
        except OSError as exc:
            message = f"inbox/ cannot be listed: {exc.strerror}"
            if exc.errno in _LISTING_REFUSED:
                return tampered(message)
            return ProtocolError(ProtocolReason.UNREADABLE, message)
        return sorted(found, key=lambda listed: (listed.sequence, listed.name))

    def _arrival(self, listed: _Listed, now: float) -> float:
        """When `listed` arrived in the inbox (monotonic), as far as can be known.

        An event's arrival, if the watcher noted one. Otherwise (a scan found the file)
        the inode's status-change time, taken before the claim changes it: the kernel
        sets it to its own clock whenever a name is created, renamed or linked in, or
        the file written, and no call lets the actor set it (utime sets the modification
        time, which is why that one is not used, and moves ctime to now). The actor can
        only make it later, never earlier than the name's arrival. The clock is the
        kernel's coarse wall clock: it is brought onto the monotonic clock now, and
        bounded to lie between the observation's publication and `now`, the moment it
        was found, whatever the wall clock did meanwhile.
        """
        noted = self.watcher.arrival_of(listed.name)
        if noted is not None:
            return noted
        changed = now - (time.time_ns() - listed.changed_ns) / 1e9
        return min(max(changed, self.published_at), now)

    def _unless_tampered(self, outcome: ParseOutcome) -> ParseOutcome:
        """Tampering seen after a claim decides over its outcome (the evidence is kept)."""
        problem = self.dirs.problem()
        return outcome if problem is None else tampered(problem)

    def _look(self, sequence: int, deadline: float | None) -> _Sighting | None:
        """The name to judge, if any. Names that arrived after `deadline` (monotonic)
        are left where they are: they answer nothing now, and are swept as late."""
        found = self._responses()
        if isinstance(found, ProtocolError):
            return _Sighting(problem=found)
        now = time.monotonic()
        timely = [(listed, self._arrival(listed, now)) for listed in found]
        if deadline is not None:
            timely = [(listed, arrived) for listed, arrived in timely if arrived <= deadline]
        # Another response name wins over the awaited one: nothing runs once the
        # actor is seen to break the protocol.
        for listed, arrived in timely:
            if listed.sequence != sequence:
                return _Sighting(listed.sequence, listed.name, arrived_at=arrived)
        if not timely:
            return None
        listed, arrived = timely[0]
        return _Sighting(listed.sequence, listed.name, arrived_at=arrived)

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
        """Wait for `resp-<sequence>.json`; claim and judge it, or whatever came instead.

        Nothing that arrived after `timeout_s` is judged, even if the last look was late."""
        started = time.monotonic()
        deadline = started + timeout_s
        found = self.watcher.wait_until(lambda: self._look(sequence, deadline), timeout_s)
        if found is None:
            return Silence(waited_s=time.monotonic() - started)
        return self._judge(found, sequence, request_id, limits)

    def try_receive(
        self,
        sequence: int,
        request_id: str,
        limits: ActionLimits,
        deadline: float | None = None,
    ) -> Reception | None:
        """`receive` without waiting: None if nothing is in the inbox yet, or nothing
        that arrived by `deadline` (monotonic)."""
        found = self.watcher.poll(lambda: self._look(sequence, deadline))
        return None if found is None else self._judge(found, sequence, request_id, limits)

    def _judge(
        self, found: _Sighting, sequence: int, request_id: str, limits: ActionLimits
    ) -> Reception:
        if found.problem is not None:
            return Reception(outcome=found.problem, name=None)
        seen, name, arrived = found.sequence, found.name, found.arrived_at
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
            return Reception(outcome=error, name=name, stray=stray, arrived_at=arrived)
        claimed = claim_from(self.dirs.inbox_fd, name, self.private_dir / name)
        if isinstance(claimed, ProtocolError):
            self._leave(name)
            return Reception(outcome=self._unless_tampered(claimed), name=name, arrived_at=arrived)
        self._claimed.add(sequence)
        outcome = parse_response(claimed.data, expected_request_id=request_id, limits=limits)
        return Reception(
            outcome=self._unless_tampered(outcome), name=name, claimed=claimed, arrived_at=arrived
        )

    def sweep_late(self) -> list[StrayResponse]:
        """After the episode closed: take every response file still arriving, as evidence.

        Changes no decision; call it after publishing the closed notice, and again once
        the actor has stopped.
        """
        found = self._responses()
        if isinstance(found, ProtocolError):
            return []
        return [self._take_stray("late", listed.sequence, listed.name) for listed in found]
