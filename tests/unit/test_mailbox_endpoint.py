"""Endpoints: 128 random bits, three folders, and only the intended actor gets in."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from mailroom.mailbox.endpoint import Endpoint, create_endpoint, held_endpoint, open_endpoint
from mailroom.mailbox.receiver import ResponseReceiver
from mailroom.mailbox.watcher import InboxWatcher

NOBODY = 65534  # uid and gid of nobody / nogroup
STRANGER = 65533  # a uid and gid that belong to nobody in particular


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_fresh_opaque_name_per_endpoint(tmp_path: Path) -> None:
    tokens = {create_endpoint(tmp_path / "mb").token for _ in range(50)}
    assert len(tokens) == 50
    for token in tokens:
        assert len(token) == 32 and int(token, 16) >= 0  # 128 bits, hexadecimal


def test_layout_and_owner_only_modes(tmp_path: Path) -> None:
    endpoint = create_endpoint(tmp_path / "mb")
    assert sorted(p.name for p in endpoint.root.iterdir()) == ["inbox", "outbox", "scratch"]
    assert _mode(tmp_path / "mb") == 0o711  # others may pass through, never list
    for path in (endpoint.root, endpoint.outbox, endpoint.inbox, endpoint.scratch):
        assert _mode(path) == 0o700


def test_group_access_for_a_separate_actor_user(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another group needs privileges here")
    endpoint = create_endpoint(tmp_path / "mb", actor_gid=NOBODY)
    expected = {
        endpoint.root: 0o750,
        endpoint.outbox: 0o2750,
        endpoint.inbox: 0o2770,
        endpoint.scratch: 0o2770,
    }
    for path, mode in expected.items():
        assert _mode(path) == mode and path.stat().st_gid == NOBODY
        assert path.stat().st_mode & 0o007 == 0  # nothing for anyone else


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A mailbox root other users can reach (pytest's own temporary root is private)."""
    if os.geteuid() != 0:
        pytest.skip("acting as other users needs root")
    with tempfile.TemporaryDirectory(dir="/tmp") as base:
        os.chmod(base, 0o711)
        yield Path(base) / "mb"


def _as(uid: int, gid: int, script: str) -> int:
    return subprocess.run(
        ["/bin/sh", "-c", script], user=uid, group=gid, extra_groups=[], capture_output=True
    ).returncode


def test_only_the_intended_actor_gets_in(shared_root: Path) -> None:
    endpoint = create_endpoint(shared_root, actor_gid=NOBODY)
    (endpoint.outbox / "obs-1.json").write_text("{}")
    os.chmod(endpoint.outbox / "obs-1.json", 0o640)
    ep, inbox, outbox = endpoint.root, endpoint.inbox, endpoint.outbox
    # The actor: reads the outbox, writes the inbox and scratch, cannot write the outbox.
    assert _as(NOBODY, NOBODY, f"cat {outbox}/obs-1.json") == 0
    assert _as(NOBODY, NOBODY, f"echo x > {inbox}/.t && mv {inbox}/.t {inbox}/resp-1.json") == 0
    assert _as(NOBODY, NOBODY, f"echo x > {endpoint.scratch}/note") == 0
    assert _as(NOBODY, NOBODY, f"echo x > {outbox}/closed.json") != 0
    assert (inbox / "resp-1.json").stat().st_gid == NOBODY  # setgid: still readable by us
    # Anyone else: cannot list the root, enter the endpoint, or read what is in it.
    assert _as(STRANGER, STRANGER, f"ls {shared_root}") != 0
    assert _as(STRANGER, STRANGER, f"ls {ep}") != 0
    assert _as(STRANGER, STRANGER, f"cat {outbox}/obs-1.json") != 0
    assert _as(STRANGER, STRANGER, f"echo x > {inbox}/resp-2.json") != 0


def test_a_same_user_endpoint_keeps_everyone_else_out(shared_root: Path) -> None:
    endpoint = create_endpoint(shared_root)
    (endpoint.outbox / "obs-1.json").write_text("{}")
    assert _as(NOBODY, NOBODY, f"ls {shared_root}") != 0
    assert _as(NOBODY, NOBODY, f"cat {endpoint.outbox}/obs-1.json") != 0
    assert _as(NOBODY, NOBODY, f"echo x > {endpoint.inbox}/resp-1.json") != 0


def test_private_evidence_may_not_live_under_the_mailbox_root(tmp_path: Path) -> None:
    endpoint = create_endpoint(tmp_path / "mb")
    with InboxWatcher(endpoint.inbox, mode="polling") as watcher:
        for private in (tmp_path / "mb" / "run", endpoint.scratch / "run", endpoint.root):
            with pytest.raises(ValueError, match="outside the mailbox root"):
                ResponseReceiver(endpoint, private, watcher)
        ResponseReceiver(endpoint, tmp_path / "run", watcher)


def test_the_folders_are_held_from_creation(tmp_path: Path) -> None:
    endpoint = create_endpoint(tmp_path / "mb")
    dirs = endpoint.held
    assert dirs.problem() is None
    for name, fd in (("outbox", dirs.outbox_fd), ("inbox", dirs.inbox_fd)):
        st = os.fstat(fd)
        assert (st.st_dev, st.st_ino) == dirs.identity(name)
        assert os.path.samefile(endpoint.root / name, dirs.watch_path(name))
    assert os.path.samefile(endpoint.scratch, f"/proc/self/fd/{dirs.scratch_fd}")
    # Never inherited by an actor process.
    for fd in (dirs.root_fd, dirs.outbox_fd, dirs.inbox_fd, dirs.scratch_fd):
        assert not os.get_inheritable(fd)
    dirs.close()
    assert dirs.closed and dirs.problem() == "the endpoint is no longer held"


def test_an_existing_endpoint_can_be_held_again(tmp_path: Path) -> None:
    created = create_endpoint(tmp_path / "mb")
    named = Endpoint(created.root)
    with pytest.raises(ValueError, match="name only"):
        _ = named.held
    held = held_endpoint(named)
    assert held.dirs is not None and held.held.problem() is None
    assert held == named and held_endpoint(held) is held  # compared by name


def test_a_symlinked_endpoint_root_is_never_held(tmp_path: Path) -> None:
    created = create_endpoint(tmp_path / "mb")
    link = tmp_path / "mb" / "link"
    os.symlink(created.root, link)
    with pytest.raises(OSError) as refused:
        open_endpoint(link)
    # O_DIRECTORY | O_NOFOLLOW: the link itself is refused, never followed.
    assert refused.value.errno in (errno.ENOTDIR, errno.ELOOP)


def test_a_chmod_of_the_actors_scratch_is_not_tampering(tmp_path: Path) -> None:
    endpoint = create_endpoint(tmp_path / "mb")
    os.chmod(endpoint.scratch, 0o755)
    assert endpoint.held.problem() is None
    os.chmod(endpoint.inbox, 0o755)
    assert endpoint.held.problem() == "the permissions or owner of inbox/ were changed"


def test_endpoints_created_in_parallel_under_a_new_root_all_succeed(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from mailroom.mailbox.endpoint import create_endpoint

    root = tmp_path / "fresh-root"
    for _attempt in range(20):  # the race is on the root's creation: try it many times
        target = root / str(_attempt)
        with ThreadPoolExecutor(max_workers=8) as pool:
            made = list(pool.map(create_endpoint, [target] * 8))
        assert len({e.root for e in made}) == 8
        for endpoint in made:
            endpoint.held.close()
