"""A provider's answer metered as the gateway meters it, fed whole, byte by byte and in
random splits (seeded: the same every time), every way giving the same reading."""

from __future__ import annotations

import random

from mailroom.orchestrator.gateway.metering import Metered, ProviderKind, response_meter

SSE = "text/event-stream"
SPLIT_SEEDS = range(20)


def meter_in_pieces(
    kind: ProviderKind, body: bytes, pieces: list[bytes], content_type: str, status: int
) -> Metered:
    assert b"".join(pieces) == body
    meter = response_meter(kind, content_type, status)
    for piece in pieces:
        meter.feed(piece)
    return meter.finish()


def random_pieces(body: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randint(1, 40))))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


def metered(
    kind: ProviderKind, body: bytes, *, content_type: str = SSE, status: int = 200
) -> Metered:
    """The body metered whole, byte by byte and in random splits: the same every time."""
    whole = meter_in_pieces(kind, body, [body], content_type, status)
    bytewise = [body[i : i + 1] for i in range(len(body))]
    assert meter_in_pieces(kind, body, bytewise, content_type, status) == whole
    for seed in SPLIT_SEEDS:
        pieces = random_pieces(body, random.Random(seed))
        assert meter_in_pieces(kind, body, pieces, content_type, status) == whole
    return whole
