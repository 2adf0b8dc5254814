"""Atomic, durable publication: readers only ever see whole files under final names."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from mailroom.mailbox.publish import canonical_json, publish_bytes, publish_json
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


def test_canonical_json_is_stable_and_refuses_nan() -> None:
    assert canonical_json({"b": 1, "a": "é"}) == canonical_json({"a": "é", "b": 1})
    assert json.loads(canonical_json({"a": [1.5]})) == {"a": [1.5]}
    with pytest.raises(ValueError):
        canonical_json({"a": float("nan")})
