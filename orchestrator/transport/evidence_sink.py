"""What a transport records through: the attempt's private evidence, as a Protocol.

A transport logs what crossed (observations published, responses claimed, the close),
keeps the observation files it sent and the raw responses it received. It names only
this Protocol, so the transport never imports the episode above it;
`mailroom.orchestrator.episode.evidence.EpisodeEvidence` is what implements it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class EvidenceSink(Protocol):
    def event(self, kind: str, /, **fields: Any) -> None:
        """Append one record to the attempt's event log now."""

    def keep_observation_file(self, name: str, data: bytes) -> None:
        """Keep a private copy of an observation file the actor was sent."""

    def response_path(self, sequence: int) -> Path:
        """Where the raw response of decision `sequence` is kept."""

    @property
    def responses_dir(self) -> Path:
        """The private folder raw responses are claimed into."""
