"""What an actor keeps in its endpoint: counted exactly, bounded, never through a symlink."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from mailroom.mailbox.endpoint import Endpoint, create_endpoint
from mailroom.mailbox.publish import publish_to_outbox
from mailroom.mailbox.quota import Usage, endpoint_usage

TEN_GB = 10 * 1024**3
PLENTY = 1_000_000


@pytest.fixture
def endpoint(tmp_path: Path) -> Endpoint:
    return create_endpoint(tmp_path / "mailbox")


def _fill(folder: Path, files: int, size: int, per_folder: int = 500) -> None:
    """`files` files of `size` bytes, `per_folder` to a subfolder."""
    for i in range(files):
        sub = folder / f"d{i // per_folder}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}").write_bytes(b"x" * size)


def test_a_fresh_endpoint_holds_nothing_of_the_actors(endpoint: Endpoint) -> None:
    publish_to_outbox(endpoint.held, "obs-1.json", b"{}" * 1000)  # the orchestrator's own
    assert endpoint_usage(endpoint, PLENTY) == Usage(0, 0, 0, False)


def test_thousands_of_files_are_counted_exactly(endpoint: Endpoint) -> None:
    _fill(endpoint.scratch, 5000, 10)
    for i in range(1000):
        (endpoint.inbox / f"junk-{i}.txt").write_bytes(b"yy")
    (endpoint.root / "beside.txt").write_bytes(b"z" * 7)  # beside the protocol's folders
    started = time.perf_counter()
    usage = endpoint_usage(endpoint, PLENTY)
    elapsed = time.perf_counter() - started
    print(f"\nendpoint_usage over {usage.files} entries: {elapsed * 1000:.1f} ms")
    assert usage.files == 5000 + 10 + 1000 + 1  # files, their 10 folders, junk, beside.txt
    assert usage.bytes == 5000 * 10 + 1000 * 2 + 7
    assert usage.allocated_bytes > 0 and not usage.truncated


def test_a_sparse_file_is_large_in_bytes_and_small_in_allocation(endpoint: Endpoint) -> None:
    sparse = endpoint.scratch / "sparse.bin"
    sparse.touch()
    os.truncate(sparse, TEN_GB)
    (endpoint.scratch / "dense.bin").write_bytes(b"d" * 65536)
    usage = endpoint_usage(endpoint, PLENTY)
    assert (usage.files, usage.bytes) == (2, TEN_GB + 65536)
    assert 65536 <= usage.allocated_bytes < 4 * 1024**2
    assert usage.allocated_bytes == sum(
        os.lstat(p).st_blocks * 512 for p in (sparse, endpoint.scratch / "dense.bin")
    )


def test_the_count_stops_at_its_cap_and_says_so(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(endpoint.scratch, 3000, 1, per_folder=1)  # 3000 folders of one file
    opened: list[object] = []
    real_open = os.open

    def counting_open(path: str, flags: int, *args: int, dir_fd: int | None = None) -> int:
        opened.append(path)
        return real_open(path, flags, *args, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", counting_open)
    started = time.perf_counter()
    usage = endpoint_usage(endpoint, 50)
    elapsed = time.perf_counter() - started
    print(f"\ncapped endpoint_usage: {elapsed * 1000:.2f} ms, {len(opened)} folders opened")
    assert usage.truncated and usage.files == 50
    assert len(opened) <= 51  # bounded work: not one folder per file of the 3000
    exact = endpoint_usage(endpoint, 6000)
    assert (exact.files, exact.truncated) == (6000, False)
    assert endpoint_usage(endpoint, 5999).truncated


def test_exactly_the_cap_is_not_truncated(endpoint: Endpoint) -> None:
    for i in range(10):
        (endpoint.scratch / f"f{i}").write_bytes(b"")
    assert endpoint_usage(endpoint, 10) == Usage(10, 0, 0, False)
    assert endpoint_usage(endpoint, 9).truncated


def test_symlinks_are_counted_never_followed(endpoint: Endpoint, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    big = outside / "big.bin"
    big.touch()
    os.truncate(big, TEN_GB)
    _fill(outside, 100, 1)
    os.symlink(big, endpoint.scratch / "to-a-file")
    os.symlink(outside, endpoint.scratch / "to-a-folder")
    os.symlink(outside, endpoint.inbox / "resp-1.json")
    usage = endpoint_usage(endpoint, PLENTY)
    assert usage.files == 3 and usage.bytes == 0  # three links, none of what they lead to


def test_the_actors_own_folders_replaced_by_symlinks_are_not_followed(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    _fill(outside, 100, 1)
    os.rename(endpoint.scratch, endpoint.root / "old-scratch")
    os.symlink(outside, endpoint.scratch)
    (endpoint.root / "old-scratch" / "kept").write_bytes(b"abc")
    usage = endpoint_usage(endpoint, PLENTY)
    # The link itself, and what is still in the real scratch folder under its new name.
    assert (usage.files, usage.bytes) == (2, 3)


def test_hard_links_count_their_bytes_once(endpoint: Endpoint) -> None:
    first = endpoint.scratch / "a"
    first.write_bytes(b"q" * 1000)
    os.link(first, endpoint.scratch / "b")
    usage = endpoint_usage(endpoint, PLENTY)
    assert (usage.files, usage.bytes) == (2, 1000)


def test_the_outbox_is_known_by_identity_not_by_name(endpoint: Endpoint) -> None:
    publish_to_outbox(endpoint.held, "obs-1.json", b"o" * 5000)
    os.rename(endpoint.outbox, endpoint.root / "renamed")
    endpoint.outbox.mkdir()  # the actor's own folder now carries the name
    (endpoint.outbox / "mine").write_bytes(b"m" * 11)
    usage = endpoint_usage(endpoint, PLENTY)
    assert (usage.files, usage.bytes) == (2, 11)


def test_a_name_only_endpoint_is_measured_by_names(endpoint: Endpoint) -> None:
    publish_to_outbox(endpoint.held, "obs-1.json", b"o" * 5000)
    (endpoint.inbox / "resp-1.json").write_bytes(b"r" * 20)
    usage = endpoint_usage(Endpoint(endpoint.root), PLENTY)
    assert (usage.files, usage.bytes) == (1, 20)


def test_deep_nesting_stops_at_the_depth_bound(endpoint: Endpoint) -> None:
    deep = endpoint.scratch
    for i in range(40):
        deep = deep / f"n{i}"
    deep.mkdir(parents=True)
    shallow = endpoint_usage(endpoint, PLENTY, max_depth=10)
    assert shallow.truncated and shallow.files < 40
    full = endpoint_usage(endpoint, PLENTY, max_depth=64)
    assert (full.files, full.bytes, full.truncated) == (40, 0, False)


def test_a_fifo_is_counted_never_opened(endpoint: Endpoint) -> None:
    os.mkfifo(endpoint.scratch / "pipe")  # opening it would block: it is only counted
    assert endpoint_usage(endpoint, PLENTY) == Usage(1, 0, 0, False)


def test_bounds_must_not_be_negative(endpoint: Endpoint) -> None:
    with pytest.raises(ValueError):
        endpoint_usage(endpoint, -1)
