"""A person's request that a launch stop (Ctrl-C, SIGTERM), heard by its executor.

The signal handler only sets it; the executor looks at it between reports, ends its
workers (each live episode unwinds: its actor stopped, no result written) and starts
nothing more. The launch then records each attempt cut short after its actor saw an
observation as interrupted (`campaign/launch.py`); one that saw nothing is left for
`mailroom resume` to run."""

from __future__ import annotations

import signal
from dataclasses import dataclass


@dataclass
class StopRequest:
    signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def request(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum

    def name(self) -> str:
        """The signal's name (SIGINT), or "" while none was requested."""
        return "" if self.signum is None else signal.Signals(self.signum).name
