"""Episode videos: one H.264 MP4 per camera, streamed frame by frame, published whole.

Each camera's file is encoded under a temporary name beside its final one
(`videos/.<camera>.mp4.<hex>.tmp`) and renamed to `videos/<camera>.mp4` only once it
is complete, so an evidence video is either whole and decodable or absent. Frames go
to the encoder as they arrive; an episode is never held in memory. An episode that
executed no control gets no file at all (frames 0, file None), never an empty MP4.

Encoding: libx264 through PyAV, yuv420p, constant frame rate (pts = frame number in a
1/fps time base), preset veryfast on one thread so that video never competes with
the simulator for cores.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Final, Self

import av
import av.error
import numpy as np
import numpy.typing as npt
from av.container import InputContainer, OutputContainer
from av.video.stream import VideoStream
from mailroom.hashing import sha256_file
from mailroom.mailbox.publish import fsync_directory
from mailroom.orchestrator.records.layout import AttemptPaths

DEFAULT_FPS = 20
CODEC: Final = "libx264"
PIXEL_FORMAT = "yuv420p"
ENCODER_OPTIONS: dict[str, str] = {"preset": "veryfast", "crf": "23", "threads": "1"}
_CAMERA_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")

Frame = npt.NDArray[np.uint8]


class VideoError(Exception):
    """Base of every video failure; the message is meant for people."""


class VideoFrameError(VideoError, ValueError):
    """A frame set that cannot be encoded: wrong cameras, shape, dtype or odd size."""


class VideoStateError(VideoError):
    """A call out of order: `add` or `finish` after the video was finished or aborted."""


class VideoDecodeError(VideoError):
    """A file that is not a decodable video."""


@dataclass(frozen=True)
class VideoRecord:
    """What an episode's video for one camera is; `file` is relative to the episode dir."""

    file: str | None
    frames: int
    fps: int
    width: int | None
    height: int | None
    sha256: str | None

    def document(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class VideoProbe:
    """What decoding a whole file found: every frame is decoded, not only counted."""

    codec: str
    pixel_format: str
    frames: int
    fps: Fraction
    width: int
    height: int
    duration_s: float
    constant_frame_rate: bool
    sha256: str


class CameraEncoder:
    """One camera's open MP4, under its temporary name until `close` (the caller renames
    it onto `final`): frame n at n / fps."""

    def __init__(self, final: Path, width: int, height: int, fps: int) -> None:
        self.final = final
        self.temporary = final.with_name(f".{final.name}.{secrets.token_hex(6)}.tmp")
        self.width = width
        self.height = height
        self.frames = 0
        self._time_base = Fraction(1, fps)
        self._container: OutputContainer = av.open(str(self.temporary), mode="w", format="mp4")
        try:
            stream: VideoStream = self._container.add_stream(
                CODEC, rate=fps, options=dict(ENCODER_OPTIONS)
            )
            stream.width = width
            stream.height = height
            stream.pix_fmt = PIXEL_FORMAT
            stream.time_base = self._time_base
        except BaseException:
            self.discard()
            raise
        self._stream = stream

    def encode(self, image: Frame) -> None:
        frame = av.VideoFrame.from_ndarray(image, format="rgb24")
        frame.pts = self.frames
        frame.time_base = self._time_base
        self._container.mux(self._stream.encode(frame))
        self.frames += 1

    def close(self) -> None:
        """Flush the encoder and close the file; it stays under its temporary name."""
        self._container.mux(self._stream.encode(None))
        self._container.close()
        fd = os.open(self.temporary, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def discard(self) -> None:
        # A half-written file is removed below whether or not it closes cleanly.
        with contextlib.suppress(av.error.FFmpegError, OSError, ValueError):
            self._container.close()
        self.temporary.unlink(missing_ok=True)


class EpisodeVideo:
    """The videos of one episode: `add` per executed control, then `finish` or `abort`.

    `directory` is the episode's evidence directory; files go to `directory/videos/`.
    Used as a context manager, an episode left without `finish` is aborted.
    """

    def __init__(self, directory: Path, cameras: Sequence[str], fps: int = DEFAULT_FPS) -> None:
        names = list(cameras)
        if not names:
            raise ValueError("an episode video needs at least one camera")
        if len(set(names)) != len(names):
            raise ValueError(f"cameras repeat: {names}")
        for name in names:
            if not _CAMERA_NAME.match(name):
                raise ValueError(f"camera name {name!r} is not a plain file-name stem")
        if isinstance(fps, bool) or not isinstance(fps, int) or fps < 1:
            raise ValueError(f"fps must be a positive integer, not {fps!r}")
        self.directory = directory
        self._paths = AttemptPaths(directory)
        self.cameras: tuple[str, ...] = tuple(names)
        self.fps = fps
        self._encoders: dict[str, CameraEncoder] = {}
        self._frames = 0
        self._closed = False
        self._finished = False

    @property
    def frames(self) -> int:
        return self._frames

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not self._closed:
            self.abort()

    def add(self, frames: Mapping[str, Frame]) -> None:
        """One executed control: an HxWx3 uint8 RGB image per camera, as delivered.

        A refused frame set (VideoFrameError) changes nothing; after any other failure
        the episode's video is unusable and must be aborted."""
        if self._closed:
            raise VideoStateError("this episode's video was already finished or aborted")
        if set(frames) != set(self.cameras):
            raise VideoFrameError(
                f"expected frames for cameras {sorted(self.cameras)}, got {sorted(frames)}"
            )
        checked = {name: self._check(name, frames[name]) for name in self.cameras}
        if not self._encoders:
            self._open(checked)
        for name in self.cameras:
            self._encoders[name].encode(checked[name])
        self._frames += 1

    def finish(self) -> dict[str, VideoRecord]:
        """Close every file and publish it under its final name; one record per camera."""
        if self._closed:
            raise VideoStateError("this episode's video was already finished or aborted")
        if not self._encoders:
            self._closed = True
            return {name: self._empty_record() for name in self.cameras}
        try:
            for encoder in self._encoders.values():
                encoder.close()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        self._finished = True
        records: dict[str, VideoRecord] = {}
        for name, encoder in self._encoders.items():
            os.replace(encoder.temporary, encoder.final)
            records[name] = VideoRecord(
                file=self._paths.relative(encoder.final),
                frames=encoder.frames,
                fps=self.fps,
                width=encoder.width,
                height=encoder.height,
                sha256=sha256_file(encoder.final),
            )
        fsync_directory(self._videos_dir)
        return records

    def abort(self) -> None:
        """Drop every temporary file; no partial `.mp4` is left behind. Idempotent, and
        a no-op once `finish` has published the files."""
        if self._finished:
            return
        self._closed = True
        for encoder in self._encoders.values():
            encoder.discard()

    @property
    def _videos_dir(self) -> Path:
        return self._paths.videos

    def _empty_record(self) -> VideoRecord:
        return VideoRecord(file=None, frames=0, fps=self.fps, width=None, height=None, sha256=None)

    def _check(self, name: str, image: object) -> Frame:
        if not isinstance(image, np.ndarray):
            raise VideoFrameError(f"{name}: a frame is a numpy array, not {type(image).__name__}")
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise VideoFrameError(
                f"{name}: a frame is HxWx3 uint8 RGB, got {image.dtype} {tuple(image.shape)}"
            )
        height, width = int(image.shape[0]), int(image.shape[1])
        if height < 2 or width < 2 or height % 2 or width % 2:
            raise VideoFrameError(f"{name}: yuv420p needs even dimensions, got {width}x{height}")
        encoder = self._encoders.get(name)
        if encoder is not None and (encoder.width, encoder.height) != (width, height):
            raise VideoFrameError(
                f"{name}: frame size changed from {encoder.width}x{encoder.height} "
                f"to {width}x{height}"
            )
        return np.ascontiguousarray(image)

    def _open(self, first: Mapping[str, Frame]) -> None:
        self._videos_dir.mkdir(parents=True, exist_ok=True)
        try:
            for name in self.cameras:
                height, width = int(first[name].shape[0]), int(first[name].shape[1])
                final = self._paths.video(name)
                self._encoders[name] = CameraEncoder(final, width, height, self.fps)
        except BaseException:
            self.abort()
            raise


def _open_input(path: Path) -> InputContainer:
    try:
        return av.open(str(path), mode="r")
    except (av.error.FFmpegError, OSError) as exc:
        raise VideoDecodeError(f"{path}: not a readable video: {exc}") from exc


def read_frames(path: Path) -> Iterator[Frame]:
    """Decode every frame of the file's first video stream as HxWx3 uint8 RGB."""
    container = _open_input(path)
    try:
        if not container.streams.video:
            raise VideoDecodeError(f"{path}: holds no video stream")
        try:
            for frame in container.decode(container.streams.video[0]):
                yield np.asarray(frame.to_ndarray(format="rgb24"), dtype=np.uint8)
        except av.error.FFmpegError as exc:
            raise VideoDecodeError(f"{path}: decoding failed: {exc}") from exc
    finally:
        container.close()


def probe_video(path: Path) -> VideoProbe:
    """Decode the whole file and describe it: codec, pixel format, frames, rate, size."""
    container = _open_input(path)
    try:
        if not container.streams.video:
            raise VideoDecodeError(f"{path}: holds no video stream")
        stream = container.streams.video[0]
        frames = 0
        times: list[Fraction] = []
        try:
            for frame in container.decode(stream):
                frames += 1
                if frame.pts is not None and frame.time_base is not None:
                    times.append(frame.pts * frame.time_base)
        except av.error.FFmpegError as exc:
            raise VideoDecodeError(f"{path}: decoding failed after {frames} frames: {exc}") from exc
        rate = stream.average_rate or stream.guessed_rate
        if rate is None or rate <= 0:
            raise VideoDecodeError(f"{path}: declares no frame rate")
        fps = Fraction(rate)
        steps = {b - a for a, b in itertools.pairwise(times)}
        return VideoProbe(
            codec=stream.codec_context.name,
            pixel_format=str(stream.codec_context.pix_fmt),
            frames=frames,
            fps=fps,
            width=stream.codec_context.width,
            height=stream.codec_context.height,
            duration_s=float(frames / fps),
            constant_frame_rate=len(times) == frames and steps <= {1 / fps},
            sha256=sha256_file(path),
        )
    finally:
        container.close()
