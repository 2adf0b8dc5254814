"""What a run records of its actors' confinement: the modes, the network policies, and
one attempt's confinement record as its result document keeps it.

Resolving a run's confinement, and the sandbox that enforces it, are the actors' room
(`actors/confinement.py`, `actors/sandbox.py`); this is only the vocabulary a run's
manifest and results are written in.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

ConfinementMode = Literal["sandbox", "none", "external"]
# "gateway": the actor's only route out is the provider gateway.
NetworkPolicy = Literal["none", "gateway", "host"]


class ConfinementRecord(BaseModel):
    """What one attempt's result says of its confinement: its mode, and its network
    (null for an external actor: nothing is known of it)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    mode: ConfinementMode
    network: NetworkPolicy | None
