"""The exactly-once claim: out of the inbox into private evidence, by link and unlink."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from mailbox_cases import write_atomically
from mailroom.mailbox.claim import Claimed, claim_from, claim_response, read_response_copy
from mailroom.mailbox.parser import MAX_RESPONSE_BYTES, ProtocolError, ProtocolReason


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    inbox, private = tmp_path / "inbox", tmp_path / "private"
    inbox.mkdir()
    return inbox, private


def test_a_claim_keeps_a_private_copy_the_actor_cannot_rewrite(dirs: tuple[Path, Path]) -> None:
    inbox, private = dirs
    source = inbox / "resp-1.json"
    write_atomically(source, b'{"a": 1}')
    os.chmod(source, 0o6777)  # what an actor may leave on its own file
    inode = source.stat().st_ino
    held = os.open(source, os.O_RDWR)  # an actor keeping a descriptor on its response
    try:
        claimed = claim_response(source, private / "resp-1.json")
        assert isinstance(claimed, Claimed) and claimed.data == b'{"a": 1}'
        assert not source.exists()
        os.pwrite(held, b'{"a": 2, "rewritten": "after the claim"}', 0)
    finally:
        os.close(held)
    kept = private / "resp-1.json"
    assert kept.read_bytes() == b'{"a": 1}'  # the record is what was judged
    assert kept.stat().st_ino != inode and kept.stat().st_nlink == 1
    assert kept.stat().st_mode & 0o7777 == 0o600
    assert [p.name for p in private.iterdir()] == ["resp-1.json"]  # no staged copy left


def test_a_name_is_claimed_once_only(dirs: tuple[Path, Path]) -> None:
    inbox, private = dirs
    source, kept = inbox / "resp-1.json", private / "resp-1.json"
    write_atomically(source, b"first")
    assert isinstance(claim_response(source, kept), Claimed)
    write_atomically(source, b"second")
    again = claim_response(source, kept)
    assert isinstance(again, ProtocolError)
    assert again.reason is ProtocolReason.DUPLICATE_RESPONSE
    # Never a second decision: the first evidence stands, the second file is not taken.
    assert kept.read_bytes() == b"first" and source.read_bytes() == b"second"


def test_the_claim_never_renames(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # A rename out of a watched directory stalls watchdog's inotify events for 0.5 s.
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the claim must move by link and unlink, not rename")

    inbox, private = dirs
    write_atomically(inbox / "resp-1.json", b"{}")
    monkeypatch.setattr(os, "rename", refuse)
    monkeypatch.setattr(os, "replace", refuse)
    assert isinstance(claim_response(inbox / "resp-1.json", private / "resp-1.json"), Claimed)


@pytest.mark.parametrize("code", [errno.EXDEV, errno.EPERM])
def test_where_links_are_refused_the_copy_is_still_kept_exclusively(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    def no_link(*args: object, **kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    inbox, private = dirs
    source, kept = inbox / "resp-1.json", private / "resp-1.json"
    write_atomically(source, b"copied")
    monkeypatch.setattr(os, "link", no_link)
    claimed = claim_response(source, kept)
    assert isinstance(claimed, Claimed) and claimed.data == b"copied"
    assert kept.read_bytes() == b"copied" and not source.exists()
    write_atomically(source, b"again")
    again = claim_response(source, kept)
    assert isinstance(again, ProtocolError)
    assert again.reason is ProtocolReason.DUPLICATE_RESPONSE


def test_a_file_replaced_during_the_claim_stays_in_the_inbox(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox, private = dirs
    source, kept = inbox / "resp-1.json", private / "resp-1.json"
    write_atomically(source, b"taken")
    real_link = os.link

    def link_then_replace(src: Path, dst: Path, **kwargs: bool) -> None:
        real_link(src, dst, **kwargs)
        write_atomically(source, b"written meanwhile")  # the actor, between link and unlink

    monkeypatch.setattr(os, "link", link_then_replace)
    claimed = claim_response(source, kept)
    assert isinstance(claimed, Claimed) and claimed.data == b"taken"
    assert source.read_bytes() == b"written meanwhile"  # left for the duplicate check


def test_reads_stop_one_byte_past_the_cap(dirs: tuple[Path, Path]) -> None:
    inbox, private = dirs
    write_atomically(inbox / "resp-1.json", b"x" * (4 * MAX_RESPONSE_BYTES))
    claimed = claim_response(inbox / "resp-1.json", private / "resp-1.json")
    assert isinstance(claimed, Claimed) and len(claimed.data) == MAX_RESPONSE_BYTES + 1
    # The evidence is what was read: a giant response cannot fill the run directory.
    assert (private / "resp-1.json").stat().st_size == MAX_RESPONSE_BYTES + 1


def test_a_vanished_file_is_unreadable(dirs: tuple[Path, Path]) -> None:
    inbox, private = dirs
    gone = claim_response(inbox / "resp-1.json", private / "resp-1.json")
    assert isinstance(gone, ProtocolError) and gone.reason is ProtocolReason.UNREADABLE
    assert str(private) not in gone.message  # no private path in any message


def test_an_offline_read_leaves_the_file(dirs: tuple[Path, Path]) -> None:
    inbox, _ = dirs
    write_atomically(inbox / "resp-1.json", b"{}")
    assert read_response_copy(inbox / "resp-1.json") == b"{}"
    assert (inbox / "resp-1.json").exists()


def test_a_claim_through_a_held_inbox_never_follows_its_name(tmp_path: Path) -> None:
    inbox, decoy, private = tmp_path / "inbox", tmp_path / "decoy", tmp_path / "private"
    inbox.mkdir()
    decoy.mkdir()
    write_atomically(decoy / "resp-1.json", b"decoy")
    write_atomically(inbox / "resp-1.json", b"real")
    inbox_fd = os.open(inbox, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rename(inbox, tmp_path / "moved")
        os.symlink(decoy, inbox)
        claimed = claim_from(inbox_fd, "resp-1.json", private / "resp-1.json")
    finally:
        os.close(inbox_fd)
    assert isinstance(claimed, Claimed) and claimed.data == b"real"
    assert (decoy / "resp-1.json").read_bytes() == b"decoy"  # untouched, still there
    assert os.listdir(tmp_path / "moved") == []
