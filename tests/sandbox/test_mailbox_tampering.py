"""An actor tampering with its own endpoint: typed outcomes, nothing touched outside.

An actor that runs as the orchestrator's own user can rename, replace, symlink, remove
and re-permission anything under its endpoint. Here the actor is this test doing
exactly that to real directories, before a publication or while the orchestrator
waits; the orchestrator side is the real `MailboxTransport` (held directories, the
real watcher in both modes, the claim, the parser). Every case ends typed:
`deliver` raises `EndpointTamperedError`, `await_decision` returns the protocol error
`endpoint_tampered`, `close` records and returns. After every case, everything
outside the endpoint and the private run directory is exactly as it was: a sentinel
directory the symlinks point into, a neighbouring endpoint, the mailbox root's list.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mailbox_cases import LIMITS, encode, response, write_atomically
from mailroom.mailbox.endpoint import Endpoint, create_endpoint
from mailroom.mailbox.held_directories import EndpointTamperedError
from mailroom.mailbox.parser import Accepted, ProtocolError, ProtocolReason
from mailroom.mailbox.watcher import WatchMode
from mailroom.orchestrator.episode.evidence import EpisodeEvidence
from mailroom.orchestrator.transport.base import DecisionOutcome, Delivery, TimedOut
from mailroom.orchestrator.transport.mailbox import MailboxTransport
from recorded_events import attempt_events
from transport_deliveries import small_delivery

BOUND_S = 10.0
PRIVATE_NAME = "run-libero_object-task7-seed7"
# Whether file permissions bind this process: not for root with CAP_DAC_OVERRIDE (bit 1)
# or CAP_DAC_READ_SEARCH (bit 2); yes for anyone else, root without them included.
_CAP_EFF = int(
    next(
        line.split()[1]
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("CapEff:")
    ),
    16,
)
PERMISSIONS_BIND = os.geteuid() != 0 or not _CAP_EFF & 0b110
Snapshot = dict[str, tuple[object, ...]]
# inotify: IN_ACCESS | IN_MODIFY | IN_OPEN | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE |
# IN_DELETE. A directory listing is IN_OPEN and IN_ACCESS on the directory itself.
TOUCHES = 0x001 | 0x002 | 0x020 | 0x040 | 0x080 | 0x100 | 0x200
_LIBC = ctypes.CDLL(None, use_errno=True)


class TouchWatch:
    """Every open, read, listing or change the kernel reports under some directories.

    A symlink that is followed opens its target; a snapshot cannot see a read, this can.
    """

    def __init__(self, tops: list[Path]) -> None:
        self.fd = _LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        self.names: dict[int, str] = {}
        for top in tops:
            for folder in [top, *(p for p in top.rglob("*") if p.is_dir() and not p.is_symlink())]:
                wd = _LIBC.inotify_add_watch(self.fd, os.fsencode(folder), TOUCHES)
                assert wd >= 0, os.strerror(ctypes.get_errno())
                self.names[wd] = str(folder)

    def touches(self) -> list[str]:
        found: list[str] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return found
            offset = 0
            while offset < len(data):
                wd, mask, _, size = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16 : offset + 16 + size].rstrip(b"\0").decode()
                offset += 16 + size
                found.append(f"{self.names.get(wd, '?')}/{name} mask={mask:#x}")

    def close(self) -> None:
        os.close(self.fd)


def _tree(top: Path) -> Snapshot:
    """Every entry under `top` (and `top`), never followed: kind, mode, size, mtime, bytes."""
    found: Snapshot = {}
    pending = [top]
    while pending:
        path = pending.pop()
        st = os.lstat(path)
        rel = path.relative_to(top).as_posix()
        if stat.S_ISLNK(st.st_mode):
            found[rel] = ("link", os.readlink(path))
        elif stat.S_ISDIR(st.st_mode):
            found[rel] = ("dir", st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns)
            pending.extend(sorted(path.iterdir()))
        else:
            digest = (
                hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else ""
            )
            found[rel] = ("file", st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return found


@dataclass
class World:
    """One episode's endpoint and transport, and everything around it that must not change."""

    tmp: Path
    endpoint: Endpoint
    neighbour: Endpoint
    sentinel: Path
    evidence: EpisodeEvidence
    transport: MailboxTransport
    deliveries: list[Delivery]
    closed: bool = False
    before: dict[str, object] = field(default_factory=dict)
    watch: TouchWatch | None = None

    @property
    def private(self) -> Path:
        return self.evidence.directory

    def answer(self, sequence: int) -> bytes:
        return encode(response(request_id=self.deliveries[sequence - 1].request_id))

    def outside(self) -> dict[str, object]:
        """What lies outside this endpoint and the private run directory."""
        token = self.endpoint.token
        return {
            "top": sorted(os.listdir(self.tmp)),
            "sentinel": _tree(self.sentinel),
            "neighbour": _tree(self.neighbour.root),
            "mailbox": sorted(n for n in os.listdir(self.endpoint.mailbox_root) if token not in n),
        }

    def held_outbox(self) -> list[str]:
        return sorted(os.listdir(self.transport.dirs.outbox_fd))

    def close(self) -> None:
        self.closed = True
        self.transport.close(len(self.deliveries))

    def events(self, kind: str) -> list[dict[str, Any]]:
        return attempt_events(self.private, kind)


@pytest.fixture(params=["inotify", "polling"])
def mode(request: pytest.FixtureRequest) -> WatchMode:
    chosen: WatchMode = request.param
    return chosen


@pytest.fixture
def world(tmp_path: Path, mode: WatchMode) -> Iterator[World]:
    mailbox_root = tmp_path / "mailbox"
    endpoint = create_endpoint(mailbox_root)
    neighbour = create_endpoint(mailbox_root)
    evidence = EpisodeEvidence(tmp_path / PRIVATE_NAME / "episodes" / "a-1")
    deliveries = [small_delivery(i) for i in (1, 2, 3)]
    sentinel = tmp_path / "sentinel"
    world = World(
        tmp_path,
        endpoint,
        neighbour,
        sentinel,
        evidence,
        MailboxTransport(endpoint, evidence, watch_mode=mode),
        deliveries,
    )
    # Where an actor's symlinks lead: valid answers and the protocol's own layout.
    for folder in ("outbox", "inbox", "endpoint/outbox", "endpoint/inbox", "endpoint/scratch"):
        (sentinel / folder).mkdir(parents=True)
    for inbox in (sentinel / "inbox", sentinel / "endpoint" / "inbox", neighbour.inbox):
        write_atomically(inbox / "resp-1.json", world.answer(1))
    (sentinel / "secret.json").write_bytes(b'{"keep": "me"}')
    world.before = world.outside()
    world.watch = TouchWatch([sentinel, neighbour.root])
    yield world
    if not world.closed:
        world.close()  # never raises, whatever the endpoint has become
    evidence.close()
    dirs = world.transport.dirs
    for fd in (dirs.root_fd, dirs.outbox_fd, dirs.inbox_fd):
        os.chmod(fd, 0o700)  # through the held folders: never a path the actor changed
    touches = world.watch.touches()
    world.watch.close()
    assert touches == []  # nothing outside was opened, listed, read or changed
    assert world.outside() == world.before


# --- The actor's moves: each leaves the endpoint not as it was created. ---------------


def _aside(w: World, name: str) -> Path:
    """Move outbox/ or inbox/ out of the way, inside the endpoint."""
    moved = w.endpoint.root / f"{name}.real"
    os.rename(w.endpoint.root / name, moved)
    return moved


def outbox_symlink_to_sentinel(w: World) -> None:
    _aside(w, "outbox")
    os.symlink(w.sentinel / "outbox", w.endpoint.outbox)


def outbox_symlink_to_neighbours_inbox(w: World) -> None:
    _aside(w, "outbox")
    os.symlink(w.neighbour.inbox, w.endpoint.outbox)


def inbox_symlink_to_sentinel(w: World) -> None:
    _aside(w, "inbox")
    os.symlink(w.sentinel / "inbox", w.endpoint.inbox)


def inbox_symlink_to_neighbours_inbox(w: World) -> None:
    _aside(w, "inbox")
    os.symlink(w.neighbour.inbox, w.endpoint.inbox)


def root_symlink_to_sentinel(w: World) -> None:
    os.rename(w.endpoint.root, w.endpoint.root.with_name(f"{w.endpoint.token}.real"))
    os.symlink(w.sentinel / "endpoint", w.endpoint.root)


def outbox_replaced_by_file(w: World) -> None:
    _aside(w, "outbox")
    w.endpoint.outbox.write_bytes(b"not a folder")


def inbox_replaced_by_file(w: World) -> None:
    _aside(w, "inbox")
    w.endpoint.inbox.write_bytes(w.answer(1))


def outbox_replaced_by_folder(w: World) -> None:
    _aside(w, "outbox")
    w.endpoint.outbox.mkdir()


def inbox_replaced_by_folder(w: World) -> None:
    _aside(w, "inbox")
    w.endpoint.inbox.mkdir()
    write_atomically(w.endpoint.inbox / "resp-1.json", w.answer(1))


def outbox_removed(w: World) -> None:
    shutil.rmtree(w.endpoint.outbox)


def inbox_removed(w: World) -> None:
    shutil.rmtree(w.endpoint.inbox)


def outbox_and_inbox_swapped(w: World) -> None:
    ep = w.endpoint
    os.rename(ep.outbox, ep.root / "swap")
    os.rename(ep.inbox, ep.outbox)
    os.rename(ep.root / "swap", ep.inbox)


def root_chmod_000(w: World) -> None:
    os.chmod(w.endpoint.root, 0)


def outbox_chmod_000(w: World) -> None:
    os.chmod(w.endpoint.outbox, 0)


def inbox_chmod_000(w: World) -> None:
    os.chmod(w.endpoint.inbox, 0)


def inbox_chmod_777(w: World) -> None:
    os.chmod(w.endpoint.inbox, 0o777)


TAMPERING: list[Callable[[World], None]] = [
    outbox_symlink_to_sentinel,
    outbox_symlink_to_neighbours_inbox,
    inbox_symlink_to_sentinel,
    inbox_symlink_to_neighbours_inbox,
    root_symlink_to_sentinel,
    outbox_replaced_by_file,
    inbox_replaced_by_file,
    outbox_replaced_by_folder,
    inbox_replaced_by_folder,
    outbox_removed,
    inbox_removed,
    outbox_and_inbox_swapped,
    root_chmod_000,
    outbox_chmod_000,
    inbox_chmod_000,
    inbox_chmod_777,
]
NAMES = [t.__name__ for t in TAMPERING]


def _is_tampered(outcome: DecisionOutcome) -> bool:
    return isinstance(outcome, ProtocolError) and outcome.reason is ProtocolReason.ENDPOINT_TAMPERED


def _nothing_claimed(w: World) -> None:
    assert list((w.private / "responses").iterdir()) == []


def _close_is_recorded(w: World) -> None:
    held = w.held_outbox()
    w.close()
    assert w.held_outbox() == held  # no closed notice into a tampered endpoint
    [event] = w.events("closed_not_published")
    assert event["reason"] == "endpoint_tampered"
    assert w.events("closed_published") == []


@pytest.mark.parametrize("tamper", TAMPERING, ids=NAMES)
def test_tampering_before_a_publication(world: World, tamper: Callable[[World], None]) -> None:
    tamper(world)
    held = world.held_outbox()
    with pytest.raises(EndpointTamperedError) as raised:
        world.transport.deliver(world.deliveries[0])
    error = raised.value
    assert isinstance(error, OSError) and error.reason is ProtocolReason.ENDPOINT_TAMPERED
    assert error.as_protocol_error().reason is ProtocolReason.ENDPOINT_TAMPERED
    assert str(world.tmp) not in str(error)  # no path in the message
    assert world.held_outbox() == held  # nothing was published anywhere
    [event] = world.events("endpoint_tampered")
    assert (event["stage"], event["sequence"]) == ("publish", 1)
    # A caller that waits anyway is told the same, and nothing is claimed.
    outcome = world.transport.await_decision(world.deliveries[0], LIMITS, BOUND_S)
    assert _is_tampered(outcome)
    _nothing_claimed(world)
    _close_is_recorded(world)


@pytest.mark.parametrize("tamper", TAMPERING, ids=NAMES)
def test_tampering_while_the_orchestrator_waits(
    world: World, tamper: Callable[[World], None]
) -> None:
    world.transport.deliver(world.deliveries[0])
    acted = threading.Event()

    def actor() -> None:
        time.sleep(0.05)  # the orchestrator is waiting by then
        tamper(world)
        acted.set()

    thread = threading.Thread(target=actor)
    thread.start()
    outcome = world.transport.await_decision(world.deliveries[0], LIMITS, BOUND_S)
    thread.join()
    assert acted.is_set() and _is_tampered(outcome), outcome
    _nothing_claimed(world)
    [event] = world.events("response_rejected")
    assert event["reason"] == "endpoint_tampered"
    _close_is_recorded(world)


@pytest.mark.parametrize("tamper", TAMPERING, ids=NAMES)
def test_tampering_after_the_last_decision_leaves_close_typed(
    world: World, tamper: Callable[[World], None]
) -> None:
    first = world.deliveries[0]
    world.transport.deliver(first)
    write_atomically(world.endpoint.response_file(1), world.answer(1))
    assert isinstance(world.transport.await_decision(first, LIMITS, BOUND_S), Accepted)
    tamper(world)
    _close_is_recorded(world)
    assert world.transport.sweep_late() == 0  # a tampered inbox is not swept


# --- Entries the actor puts under the outbox's next names. ----------------------------


def test_a_folder_under_the_next_observation_name_is_tampering(world: World) -> None:
    world.transport.deliver(world.deliveries[0])
    (world.endpoint.outbox / "obs-2.json").mkdir()
    with pytest.raises(EndpointTamperedError, match=r"outbox/obs-2\.json"):
        world.transport.deliver(world.deliveries[1])
    assert (world.endpoint.outbox / "obs-2.json").is_dir()


@pytest.mark.parametrize("kind", ["symlink", "hard_link"])
def test_a_link_under_the_next_observation_name_is_replaced_not_followed(
    world: World, kind: str
) -> None:
    secret = world.sentinel / "secret.json"
    target = world.endpoint.outbox / "obs-1.json"
    if kind == "symlink":
        os.symlink(secret, target)
    else:
        os.link(secret, target)
    world.transport.deliver(world.deliveries[0])
    st = os.lstat(target)
    assert stat.S_ISREG(st.st_mode) and st.st_nlink == 1
    assert json.loads(target.read_bytes())["request_id"] == world.deliveries[0].request_id
    assert os.stat(secret).st_nlink == 1  # its bytes: checked when the case ends


# --- Response files that lead into the private run directory. -------------------------


def _exchange(world: World, sequence: int) -> None:
    delivery = world.deliveries[sequence - 1]
    world.transport.deliver(delivery)
    write_atomically(world.endpoint.response_file(sequence), world.answer(sequence))
    assert isinstance(world.transport.await_decision(delivery, LIMITS, BOUND_S), Accepted)


def _private_file_stays(private: Path, before: bytes, inbox_entry: Path) -> None:
    assert private.read_bytes() == before
    assert os.path.samefile(private, inbox_entry)  # left where it was, never taken or unlinked


def test_a_hard_link_to_a_private_file_as_the_awaited_response(world: World) -> None:
    first = world.deliveries[0]
    world.transport.deliver(first)
    private = world.private / "observations" / "obs-1.json"
    before = private.read_bytes()
    os.link(private, world.endpoint.response_file(1))
    outcome = world.transport.await_decision(first, LIMITS, BOUND_S)
    assert isinstance(outcome, ProtocolError) and outcome.reason is ProtocolReason.HARD_LINK
    _private_file_stays(private, before, world.endpoint.response_file(1))
    _nothing_claimed(world)


def test_a_hard_link_to_the_claimed_private_resp_1_json(world: World) -> None:
    _exchange(world, 1)
    private = world.private / "responses" / "resp-1.json"
    before = private.read_bytes()
    second = world.deliveries[1]
    world.transport.deliver(second)
    os.link(private, world.endpoint.response_file(2))
    outcome = world.transport.await_decision(second, LIMITS, BOUND_S)
    assert isinstance(outcome, ProtocolError) and outcome.reason is ProtocolReason.HARD_LINK
    _private_file_stays(private, before, world.endpoint.response_file(2))


def test_the_claimed_private_resp_1_json_linked_back_under_its_own_name(world: World) -> None:
    _exchange(world, 1)
    private = world.private / "responses" / "resp-1.json"
    before = private.read_bytes()
    second = world.deliveries[1]
    world.transport.deliver(second)
    os.link(private, world.endpoint.response_file(1))
    outcome = world.transport.await_decision(second, LIMITS, BOUND_S)
    assert isinstance(outcome, ProtocolError)
    assert outcome.reason is ProtocolReason.DUPLICATE_RESPONSE
    [stray] = world.events("stray_response")
    assert (stray["name"], stray["claim_error"]) == ("resp-1.json", "hard_link")
    _private_file_stays(private, before, world.endpoint.response_file(1))
    assert not (world.private / "responses" / "strays").exists() or not any(
        (world.private / "responses" / "strays").iterdir()
    )


# --- Permissions of a response file. -------------------------------------------------


def test_a_response_file_without_permissions_is_typed(world: World) -> None:
    first = world.deliveries[0]
    world.transport.deliver(first)
    target = world.endpoint.response_file(1)
    write_atomically(target, world.answer(1))
    os.chmod(target, 0)
    outcome = world.transport.await_decision(first, LIMITS, BOUND_S)
    if os.environ.get("MAILROOM_TEST_PERMISSIONS_BIND") == "1":
        assert PERMISSIONS_BIND, "started to test the other branch, but permissions do not bind"
    if not PERMISSIONS_BIND:
        # Permissions do not stop root: the file is claimed and judged on its bytes.
        assert isinstance(outcome, Accepted)
        assert (world.private / "responses" / "resp-1.json").read_bytes() == world.answer(1)
    else:
        assert isinstance(outcome, ProtocolError) and outcome.reason is ProtocolReason.UNREADABLE
    assert not isinstance(outcome, TimedOut)


@pytest.mark.skipif(PERMISSIONS_BIND, reason="the other half runs in this process already")
def test_an_unreadable_response_is_typed_where_permissions_bind() -> None:
    """The branch a non-root orchestrator takes, run here as root without the two
    capabilities that let root ignore file permissions (util-linux `setpriv`)."""
    done = subprocess.run(
        [
            *("setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"),
            *(sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider"),
            *("-k", "test_a_response_file_without_permissions_is_typed"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent,
        env={**os.environ, "MAILROOM_TEST_PERMISSIONS_BIND": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\b2 passed\b", done.stdout), done.stdout[-2000:]  # both watch modes


# --- A separate actor process doing it. -----------------------------------------------

SWAPPING_ACTOR = """
import json, os, sys, time
endpoint, decoy = sys.argv[1], sys.argv[2]
observation = os.path.join(endpoint, "outbox", "obs-1.json")
while not os.path.exists(observation):
    time.sleep(0.005)
request_id = json.load(open(observation))["request_id"]
inbox = os.path.join(endpoint, "inbox")
os.rename(inbox, inbox + ".real")
os.symlink(decoy, inbox)  # where a valid answer to this very request is waiting
print(request_id)
"""


def test_an_actor_process_swapping_its_inbox_for_a_symlink(world: World) -> None:
    actor = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SWAPPING_ACTOR,
            str(world.endpoint.root),
            str(world.sentinel / "inbox"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    first = world.deliveries[0]
    world.transport.deliver(first)
    outcome = world.transport.await_decision(first, LIMITS, BOUND_S)
    stdout, _ = actor.communicate(timeout=BOUND_S)
    assert actor.returncode == 0 and stdout.strip() == first.request_id
    assert _is_tampered(outcome), outcome
    _nothing_claimed(world)
    _close_is_recorded(world)
