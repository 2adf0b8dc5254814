"""The mailbox contract: adversarial response files through real directories.

Every case goes through the path `MailboxTransport.await_decision` takes: the real
InboxWatcher (inotify, then polling), the receiver, the exactly-once claim and the
frozen parser. Each asserts the exact typed outcome, and what is left where.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mailbox_cases import (
    CASES,
    LEFT_IN_PLACE,
    LIMITS,
    OTHER_REQUEST_ID,
    REQUEST_ID,
    VALID,
    Case,
    Maker,
    Verdict,
    encode,
    response,
    stop,
    verdict,
    write_atomically,
)
from mailroom.mailbox.endpoint import Endpoint, create_endpoint
from mailroom.mailbox.feedback import bounded_feedback
from mailroom.mailbox.messages import Feedback, from_json, to_document
from mailroom.mailbox.parser import MAX_RESPONSE_BYTES, Invalid
from mailroom.mailbox.publish import publish_json
from mailroom.mailbox.receiver import Reception, ResponseReceiver, Silence
from mailroom.mailbox.schemas import load_schema, make_validator
from mailroom.mailbox.watcher import InboxWatcher, WatchMode

# Found within one event or scan; only a broken mailbox waits this long.
BOUND_S = 10.0
# How long an ignored file is given to be (wrongly) picked up.
IGNORED_S = 0.4
# Part of the private directory's name: it must never reach an actor.
PRIVATE_MARK = "private-run-libero_spatial-task3-seed7"
NEXT_ID = "00112233445566778899aabbccddeeff"


@dataclass
class Mailbox:
    endpoint: Endpoint
    receiver: ResponseReceiver
    watcher: InboxWatcher
    private: Path
    outside: Path

    def receive(
        self,
        sequence: int,
        make: Maker | None = None,
        *,
        request_id: str = REQUEST_ID,
        timeout: float = BOUND_S,
    ) -> Reception | Silence:
        """Wait for `resp-<sequence>.json` while `make` writes, a moment later, on a thread."""
        thread = None
        if make is not None:
            target = self.endpoint.response_file(sequence)

            def write() -> None:
                time.sleep(0.02)  # usually lands while the receiver waits; either way works
                make(target, self.outside)

            thread = threading.Thread(target=write)
            thread.start()
        try:
            return self.receiver.receive(sequence, request_id, LIMITS, timeout)
        finally:
            if thread is not None:
                thread.join()

    def inbox_names(self) -> list[str]:
        return sorted(os.listdir(self.endpoint.inbox))


@pytest.fixture(params=["inotify", "polling"])
def mode(request: pytest.FixtureRequest) -> WatchMode:
    chosen: WatchMode = request.param
    return chosen


@pytest.fixture
def mailbox(tmp_path: Path, mode: WatchMode) -> Iterator[Mailbox]:
    endpoint = create_endpoint(tmp_path / "mailbox")
    private = tmp_path / PRIVATE_MARK
    outside = tmp_path / "outside"
    outside.mkdir()
    # Watched as the transport watches it: the held inbox, wherever it is moved.
    with InboxWatcher(endpoint.held.watch_path("inbox"), mode=mode) as watcher:
        yield Mailbox(
            endpoint, ResponseReceiver(endpoint, private, watcher), watcher, private, outside
        )
        assert not watcher.fell_back, watcher.fallback_detail


def _verdict(received: Reception | Silence) -> Verdict:
    return verdict(None if isinstance(received, Silence) else received.outcome)


def _check_feedback(outcome: Invalid) -> None:
    feedback = bounded_feedback(1, outcome.issues)
    text = json.dumps(to_document(feedback))
    assert from_json(Feedback, text) == feedback
    observation_id = load_schema("mailroom.observation/v1")["$id"]
    by_ref = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": f"{observation_id}#/$defs/feedback",
    }
    assert list(make_validator(by_ref).iter_errors(json.loads(text))) == []
    assert PRIVATE_MARK not in text and "libero" not in text


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_adversarial_response(mailbox: Mailbox, case: Case) -> None:
    holder: list[bytes | None] = []

    def make(target: Path, outside: Path) -> bytes | None:
        holder.append(case.make(target, outside))
        return holder[-1]

    timeout = IGNORED_S if case.expect[0] == "timeout" else BOUND_S
    received = mailbox.receive(1, make, timeout=timeout)
    assert _verdict(received) == case.expect
    target = mailbox.endpoint.response_file(1)
    kept = mailbox.private / "resp-1.json"
    if case.expect[0] == "timeout":
        assert isinstance(received, Silence)
        assert not os.path.lexists(target) and not mailbox.private.exists()
        return
    assert isinstance(received, Reception) and received.name == "resp-1.json"
    if case.expect[1][0] in LEFT_IN_PLACE:
        # Refused before reading: left where it is, nothing taken, the target untouched.
        assert received.claimed is None and os.path.lexists(target)
        assert not os.path.lexists(kept)
        if (mailbox.outside / "secret.json").exists():
            assert (mailbox.outside / "secret.json").read_bytes() == encode(response())
        return
    # Claimed: out of the inbox, into the private evidence, byte for byte as judged (a
    # file past the cap is kept to one byte past it: enough for its verdict).
    assert received.claimed is not None and received.claimed.evidence == kept
    assert not os.path.lexists(target)
    assert holder[0] is not None and kept.read_bytes() == holder[0][: MAX_RESPONSE_BYTES + 1]
    if isinstance(received.outcome, Invalid):
        _check_feedback(received.outcome)


def test_two_responses_for_one_request(mailbox: Mailbox) -> None:
    first = mailbox.receive(1, lambda t, o: write_atomically(t, VALID))
    assert _verdict(first) == ("accepted", ("act",))
    second = encode(stop())
    received = mailbox.receive(
        2, lambda t, o: write_atomically(t.with_name("resp-1.json"), second), request_id=NEXT_ID
    )
    assert _verdict(received) == ("protocol_error", ("duplicate_response",))
    assert isinstance(received, Reception) and received.stray is not None
    stray = received.stray
    assert (stray.kind, stray.name, stray.sequence) == ("duplicate", "resp-1.json", 1)
    assert stray.evidence is not None and stray.evidence.read_bytes() == second
    # The first decision's evidence is untouched; the inbox is empty.
    assert (mailbox.private / "resp-1.json").read_bytes() == VALID
    assert mailbox.inbox_names() == []


def test_non_atomic_write_in_two_halves(mailbox: Mailbox) -> None:
    # Written in place: the first half is all there is when the name is seen.
    half = len(VALID) // 2
    target = mailbox.endpoint.response_file(1)
    with target.open("wb") as fh:
        fh.write(VALID[:half])
    received = mailbox.receive(1)
    assert _verdict(received) == ("invalid", ("malformed_json",))
    assert (mailbox.private / "resp-1.json").read_bytes() == VALID[:half]

    # The writer then finishes: its second half lands in a new file under a claimed name.
    def finish(t: Path, o: Path) -> None:
        with target.open("ab") as fh:
            fh.write(VALID[half:])

    received = mailbox.receive(2, finish, request_id=NEXT_ID)
    assert _verdict(received) == ("protocol_error", ("duplicate_response",))
    assert isinstance(received, Reception) and received.stray is not None
    assert received.stray.evidence is not None
    # Written in place again: the name can be claimed before all of the half is in it
    # (seen on a loaded machine), so the evidence is what was there, a prefix of it.
    kept = received.stray.evidence.read_bytes()
    assert VALID[half:].startswith(kept)


def test_response_for_a_future_request(mailbox: Mailbox) -> None:
    ahead = encode(response())
    received = mailbox.receive(1, lambda t, o: write_atomically(t.with_name("resp-2.json"), ahead))
    assert _verdict(received) == ("protocol_error", ("unexpected_response",))
    assert isinstance(received, Reception) and received.stray is not None
    assert (received.stray.kind, received.stray.sequence) == ("unexpected", 2)
    assert received.stray.evidence is not None and received.stray.evidence.read_bytes() == ahead
    assert not (mailbox.private / "resp-1.json").exists() and mailbox.inbox_names() == []


def test_a_stray_wins_over_the_awaited_response(mailbox: Mailbox) -> None:
    # Both present at once: nothing is executed once a protocol break is visible.
    write_atomically(mailbox.endpoint.response_file(3), encode(response()))
    write_atomically(mailbox.endpoint.response_file(1), VALID)
    received = mailbox.receive(1)
    assert _verdict(received) == ("protocol_error", ("unexpected_response",))
    assert mailbox.inbox_names() == ["resp-1.json"]


def test_stale_response_under_the_next_name(mailbox: Mailbox) -> None:
    assert _verdict(mailbox.receive(1, lambda t, o: write_atomically(t, VALID))) == (
        "accepted",
        ("act",),
    )
    # resp-2.json carrying request 1's id: a stale answer, terminal.
    received = mailbox.receive(2, lambda t, o: write_atomically(t, VALID), request_id=NEXT_ID)
    assert _verdict(received) == ("protocol_error", ("request_id_mismatch",))


def test_responses_after_the_episode_closed(mailbox: Mailbox) -> None:
    assert _verdict(mailbox.receive(1, lambda t, o: write_atomically(t, VALID))) == (
        "accepted",
        ("act",),
    )
    publish_json(mailbox.endpoint.closed_file, {"schema": "mailroom.closed/v1", "last_sequence": 1})
    late_two, late_one = encode(response(request_id=OTHER_REQUEST_ID)), encode(stop())
    write_atomically(mailbox.endpoint.response_file(2), late_two)
    write_atomically(mailbox.endpoint.response_file(1), late_one)
    (mailbox.endpoint.inbox / "notes.txt").write_text("ignored")
    late = mailbox.receiver.sweep_late()
    assert [(s.kind, s.name, s.claim_error) for s in late] == [
        ("late", "resp-1.json", None),
        ("late", "resp-2.json", None),
    ]
    assert [s.evidence.read_bytes() for s in late if s.evidence] == [late_one, late_two]
    # Recorded, and nothing else changes: the decision's evidence stands.
    assert (mailbox.private / "resp-1.json").read_bytes() == VALID
    assert mailbox.inbox_names() == ["notes.txt"]
    assert mailbox.receiver.sweep_late() == []


def test_late_symlink_is_recorded_and_left(mailbox: Mailbox) -> None:
    os.symlink(mailbox.outside / "anything", mailbox.endpoint.response_file(4))
    late = mailbox.receiver.sweep_late()
    assert [(s.kind, s.sequence, s.claim_error) for s in late] == [("late", 4, "symlink")]
    assert late[0].evidence is None
    assert mailbox.receiver.sweep_late() == []  # judged once, never again


def test_replaced_inbox_is_tampering(mailbox: Mailbox) -> None:
    inbox = mailbox.endpoint.inbox
    inbox.rename(mailbox.endpoint.root / "elsewhere")
    inbox.mkdir()
    write_atomically(inbox / "resp-1.json", VALID)
    received = mailbox.receive(1)
    assert _verdict(received) == ("protocol_error", ("endpoint_tampered",))


def test_silence_is_not_an_outcome(mailbox: Mailbox) -> None:
    received = mailbox.receive(1, timeout=IGNORED_S)
    assert isinstance(received, Silence) and received.waited_s >= IGNORED_S
