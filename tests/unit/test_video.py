"""Episode videos: decodable H.264 MP4s, one per camera, complete or absent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from mailroom.hashing import sha256_file
from mailroom.orchestrator.episode.video import (
    EpisodeVideo,
    VideoDecodeError,
    VideoFrameError,
    VideoStateError,
    probe_video,
    read_frames,
)

CAMERAS = ("agentview", "robot0_eye_in_hand")
Image = npt.NDArray[np.uint8]


def scene(i: int, size: int = 256) -> Image:
    """A smooth, asymmetric picture with a moving square: what a camera might see."""
    yy, xx = np.mgrid[0:size, 0:size]
    image = np.empty((size, size, 3), dtype=np.uint8)
    image[..., 0] = (xx * 255 // (size - 1)).astype(np.uint8)
    image[..., 1] = (yy * 255 // (size - 1)).astype(np.uint8)
    image[..., 2] = 128
    left = (10 + 3 * i) % (size - 40)
    image[40:80, left : left + 40] = (255, 0, 0)
    image[size - 56 : size - 16, size - 56 : size - 16] = (0, 0, 255)
    return image


def frames_for(i: int, size: int = 256) -> dict[str, Image]:
    picture = scene(i, size)
    return {"agentview": picture, "robot0_eye_in_hand": np.ascontiguousarray(picture[::-1, ::-1])}


def names_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


@pytest.mark.parametrize("count", [1, 2, 37])
def test_decoded_frame_count_equals_the_number_of_adds(tmp_path: Path, count: int) -> None:
    video = EpisodeVideo(tmp_path, CAMERAS)
    for i in range(count):
        video.add(frames_for(i))
    records = video.finish()

    assert set(records) == set(CAMERAS)
    assert names_in(tmp_path / "videos") == ["agentview.mp4", "robot0_eye_in_hand.mp4"]
    for camera, record in records.items():
        assert record.file == f"videos/{camera}.mp4"
        path = tmp_path / record.file
        probe = probe_video(path)
        assert (record.frames, record.fps, record.width, record.height) == (count, 20, 256, 256)
        assert probe.frames == count  # every frame decoded, not a metadata count
        assert probe.codec == "h264"
        assert probe.pixel_format == "yuv420p"
        assert probe.fps == 20
        assert probe.constant_frame_rate
        assert (probe.width, probe.height) == (256, 256)
        assert probe.duration_s == pytest.approx(count / 20)
        assert record.sha256 == probe.sha256 == sha256_file(path)


def test_round_trip_is_close_to_the_input_in_order_and_orientation(tmp_path: Path) -> None:
    sent = [frames_for(i) for i in range(37)]
    video = EpisodeVideo(tmp_path, CAMERAS)
    for frames in sent:
        video.add(frames)
    records = video.finish()

    for camera in CAMERAS:
        decoded = list(read_frames(tmp_path / str(records[camera].file)))
        assert len(decoded) == len(sent)
        for i, (original, back) in enumerate(zip((f[camera] for f in sent), decoded, strict=True)):
            assert back.shape == (256, 256, 3) and back.dtype == np.uint8
            error = np.abs(original.astype(np.int16) - back.astype(np.int16))
            assert float(error.mean()) < 4.0, (camera, i)  # lossy, but close
            # A flipped or reordered frame would be far off: the markers move and differ.
            other = sent[(i + 10) % len(sent)][camera]
            assert float(np.abs(other.astype(np.int16) - back.astype(np.int16)).mean()) > 4.0


def test_an_episode_with_no_executed_control_writes_no_video(tmp_path: Path) -> None:
    records = EpisodeVideo(tmp_path, CAMERAS).finish()

    for record in records.values():
        assert record.file is None
        assert record.frames == 0
        assert record.sha256 is None
        assert record.width is None and record.height is None
    assert names_in(tmp_path) == []


def test_files_are_absent_until_finished_and_encoded_as_frames_arrive(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    video = EpisodeVideo(tmp_path, ["agentview"])
    for _ in range(80):  # noise barely compresses: ~7 KB a frame, written as it goes
        video.add({"agentview": rng.integers(0, 256, (128, 128, 3), dtype=np.uint8)})

    partial = list((tmp_path / "videos").iterdir())
    assert not any(p.name.endswith(".mp4") for p in partial)
    assert [p.name.startswith(".agentview.mp4.") for p in partial] == [True]
    assert partial[0].stat().st_size > 100_000

    records = video.finish()
    assert names_in(tmp_path / "videos") == ["agentview.mp4"]
    assert probe_video(tmp_path / str(records["agentview"].file)).frames == 80


def test_abort_leaves_no_partial_video(tmp_path: Path) -> None:
    video = EpisodeVideo(tmp_path, CAMERAS)
    for i in range(40):
        video.add(frames_for(i))
    assert not [n for n in names_in(tmp_path / "videos") if n.endswith(".mp4")]
    assert len(names_in(tmp_path / "videos")) == 2  # the temporaries
    video.abort()
    video.abort()  # idempotent

    assert names_in(tmp_path / "videos") == []
    with pytest.raises(VideoStateError):
        video.add(frames_for(0))
    with pytest.raises(VideoStateError):
        video.finish()


def test_leaving_the_context_unfinished_aborts(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), EpisodeVideo(tmp_path, CAMERAS) as video:
        video.add(frames_for(0))
        raise RuntimeError("the episode failed")
    assert names_in(tmp_path / "videos") == []

    with EpisodeVideo(tmp_path, CAMERAS) as video:
        video.add(frames_for(0))
        records = video.finish()
    assert probe_video(tmp_path / str(records["agentview"].file)).frames == 1


def test_abort_after_finish_keeps_the_published_files(tmp_path: Path) -> None:
    video = EpisodeVideo(tmp_path, CAMERAS)
    video.add(frames_for(0))
    video.finish()
    video.abort()
    assert names_in(tmp_path / "videos") == ["agentview.mp4", "robot0_eye_in_hand.mp4"]


@pytest.mark.parametrize(
    ("frames", "message"),
    [
        ({"agentview": scene(0)}, "expected frames for cameras"),
        ({**frames_for(0), "extra": scene(0)}, "expected frames for cameras"),
        ({**frames_for(0), "agentview": scene(0).astype(np.float32)}, "uint8"),
        ({**frames_for(0), "agentview": scene(0)[..., :2].copy()}, "HxWx3"),
        ({**frames_for(0), "agentview": scene(0)[:255]}, "even dimensions"),
    ],
)
def test_frames_that_cannot_be_encoded_are_refused(
    tmp_path: Path, frames: dict[str, Image], message: str
) -> None:
    video = EpisodeVideo(tmp_path, CAMERAS)
    with pytest.raises(VideoFrameError, match=message):
        video.add(frames)
    video.abort()


def test_a_camera_cannot_change_size_mid_episode(tmp_path: Path) -> None:
    video = EpisodeVideo(tmp_path, CAMERAS)
    video.add(frames_for(0))
    with pytest.raises(VideoFrameError, match="size changed"):
        video.add(frames_for(1, size=128))
    video.abort()
    assert names_in(tmp_path / "videos") == []


@pytest.mark.parametrize(
    ("cameras", "fps"),
    [([], 20), (["agentview", "agentview"], 20), (["../escape"], 20), (CAMERAS, 0)],
)
def test_bad_construction_is_refused(tmp_path: Path, cameras: list[str], fps: int) -> None:
    with pytest.raises(ValueError):
        EpisodeVideo(tmp_path, cameras, fps=fps)


def test_probing_a_file_that_is_not_a_video_fails_clearly(tmp_path: Path) -> None:
    bogus = tmp_path / "agentview.mp4"
    bogus.write_bytes(b"not a video at all")
    with pytest.raises(VideoDecodeError):
        probe_video(bogus)
