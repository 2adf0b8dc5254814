"""Both PNG encoders give standard PNGs that decode to exactly the frame delivered."""

from __future__ import annotations

import numpy as np
import pytest
from mailroom.orchestrator.transport.png import available_encoders, decode_png, encode_png


def _frame() -> np.ndarray:
    rng = np.random.default_rng(3)
    smooth = np.linspace(0, 255, 256, dtype=np.float64)[None, :, None]
    noise = rng.integers(0, 40, size=(256, 256, 3))
    return np.clip(smooth + noise, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("encoder", ["fpng", "pillow"])
def test_encoder_round_trips_pixels_exactly(encoder: str) -> None:
    assert encoder in available_encoders()
    frame = _frame()
    data = encode_png(frame, encoder)  # type: ignore[arg-type]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.array_equal(decode_png(data), frame)


def test_a_flipped_view_is_encoded_as_shown() -> None:
    frame = _frame()[::-1, ::-1]  # the protocol transform gives a negative-stride view
    assert np.array_equal(decode_png(encode_png(frame)), frame)


@pytest.mark.parametrize("bad", [np.zeros((4, 4), np.uint8), np.zeros((4, 4, 3), np.float32)])
def test_non_rgb8_frames_are_refused(bad: np.ndarray) -> None:
    with pytest.raises(ValueError):
        encode_png(bad)
