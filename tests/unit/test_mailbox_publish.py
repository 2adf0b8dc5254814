"""Atomic, durable publication: readers only ever see whole files under final names."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from mailroom.mailbox.endpoint import create_endpoint
from mailroom.mailbox.held_directories import EndpointTamperedError
from mailroom.mailbox.publish import (
    document_bytes,
    publish_bytes,
    publish_into,
    publish_json,
    publish_to_outbox,
)
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer


def test_the_final_name_holds_exactly_the_bytes_and_nothing_is_left(tmp_path: Path) -> None:
    publish_bytes(tmp_path / "obs-1.json", b"hello")
    publish_bytes(tmp_path / "obs-1.json", b"replaced")
    assert os.listdir(tmp_path) == ["obs-1.json"]
    assert (tmp_path / "obs-1.json").read_bytes() == b"replaced"


def test_write_fsync_replace_then_fsync_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_fsync, real_replace, real_write = os.fsync, os.replace, os.write

    def fsync(fd: int) -> None:
        kind = "dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "file"
        calls.append(f"fsync {kind}")
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        temp = Path(src)
        assert temp.parent == tmp_path and temp.name.startswith(".")  # same directory, hidden
        calls.append("replace")
        real_replace(src, dst)

    def write(fd: int, data: bytes | memoryview) -> int:
        calls.append("write")
        return real_write(fd, data)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "write", write)
    publish_bytes(tmp_path / "obs-1.json", b"{}")
    assert calls == ["write", "fsync file", "replace", "fsync dir"]


def test_a_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data: bytes | memoryview) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError):
        publish_bytes(tmp_path / "obs-1.json", b"{}")
    assert os.listdir(tmp_path) == []


class _Recorder(FileSystemEventHandler):
    def __init__(self) -> None:
        self.events: list[FileSystemEvent] = []
        self.lock = threading.Lock()

    def on_any_event(self, event: FileSystemEvent) -> None:
        with self.lock:
            self.events.append(event)


def test_a_watcher_sees_final_names_only_as_moves(tmp_path: Path) -> None:
    recorder = _Recorder()
    observer = Observer()
    observer.schedule(recorder, str(tmp_path), recursive=False)
    observer.start()
    try:
        finals = {str(tmp_path / f"obs-{i}.json") for i in range(1, 21)}
        for name in sorted(finals):
            publish_json(Path(name), {"n": name})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with recorder.lock:
                moved = {str(e.dest_path) for e in recorder.events if e.event_type == "moved"}
            if finals <= moved:
                break
            time.sleep(0.01)
    finally:
        observer.stop()
        observer.join()
    assert finals <= moved
    for event in recorder.events:
        if event.event_type != "moved" and str(event.src_path) in finals:
            pytest.fail(f"{event.event_type} on a final name: it was visible before whole")


def test_document_bytes_are_stable_and_refuse_nan() -> None:
    assert document_bytes({"b": 1, "a": "é"}) == document_bytes({"a": "é", "b": 1})
    assert document_bytes({"b": [1], "a": "é"}) == '{\n "a": "é",\n "b": [\n  1\n ]\n}\n'.encode()
    assert document_bytes({"b": 1, "a": 2}, sort_keys=False) == b'{\n "b": 1,\n "a": 2\n}\n'
    assert json.loads(document_bytes({"a": [1.5]})) == {"a": [1.5]}
    with pytest.raises(ValueError):
        document_bytes({"a": float("nan")})


def test_publish_into_a_held_folder_never_resolves_its_path(tmp_path: Path) -> None:
    folder, elsewhere = tmp_path / "outbox", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        moved = tmp_path / "moved"
        os.rename(folder, moved)
        os.symlink(elsewhere, folder)  # the old name now leads elsewhere
        publish_into(fd, "obs-1.json", b"{}")
        with pytest.raises(ValueError):
            publish_into(fd, "../obs-1.json", b"{}")  # plain names only
    finally:
        os.close(fd)
    assert os.listdir(moved) == ["obs-1.json"] and os.listdir(elsewhere) == []


def test_publish_to_outbox_types_tampering_and_obstruction(tmp_path: Path) -> None:
    endpoint = create_endpoint(tmp_path / "mb")
    (endpoint.outbox / "obs-1.json").mkdir()  # a folder under the next name
    with pytest.raises(EndpointTamperedError, match="could not be published"):
        publish_to_outbox(endpoint.held, "obs-1.json", b"{}")
    assert [n for n in os.listdir(endpoint.outbox) if n.startswith(".")] == []  # no leftovers
    os.chmod(endpoint.outbox, 0o755)
    with pytest.raises(EndpointTamperedError, match="permissions"):
        publish_to_outbox(endpoint.held, "obs-2.json", b"{}")
    assert not (endpoint.outbox / "obs-2.json").exists()


def test_the_machines_own_failures_pass_through_untyped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = create_endpoint(tmp_path / "mb")

    def full(fd: int, data: bytes | memoryview) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as raised:
        publish_to_outbox(endpoint.held, "obs-1.json", b"{}")
    assert not isinstance(raised.value, EndpointTamperedError)
    assert os.listdir(endpoint.outbox) == []


def test_a_batch_is_staged_whole_then_renamed_in_order_then_synced_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mailroom.mailbox.publish import publish_all_into

    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        kind = "dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "file"
        calls.append(f"fsync {kind}")
        real_fsync(fd)

    def replace(src: str, dst: str, **dir_fds: int) -> None:
        calls.append(f"replace {dst}")
        real_replace(src, dst, **dir_fds)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        publish_all_into(fd, [("a.png", b"a"), ("b.png", b"b"), ("obs-1.json", b"{}")])
    finally:
        os.close(fd)
    assert calls == [
        "fsync file",
        "fsync file",
        "fsync file",
        "replace a.png",
        "replace b.png",
        "replace obs-1.json",
        "fsync dir",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.png", "obs-1.json"]
