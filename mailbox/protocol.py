"""The versions of the mailbox protocol: which observation and response schemas an
actor reads and writes. Each version is frozen: a new one is new schema files and new
instruction texts, never an edit.

- v1: a 7-number action in [-1, 1] for an OSC_POSE controller; proprioception as 7
  joint positions and 2 gripper positions (LIBERO's shape).
- v2: any family's action shape: the observation's `action_spec` says how many numbers
  an action holds (`dimension`), their bounds (`low`, `high`) and the controller, and
  `proprio` names its own fields.

A family speaks v1 when its shape fits it (what its actors see then stays exactly as
before), otherwise v2 (`orchestrator/sim/specs.py` decides). The closing notice is
`mailroom.closed/v1` in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ProtocolVersion = Literal["v1", "v2"]


@dataclass(frozen=True)
class MailboxProtocol:
    version: ProtocolVersion
    observation_schema: str
    response_schema: str

    @property
    def label(self) -> str:
        """How a run manifest names it."""
        return f"{self.observation_schema} + {self.response_schema}"


PROTOCOL_V1 = MailboxProtocol("v1", "mailroom.observation/v1", "mailroom.response/v1")
PROTOCOL_V2 = MailboxProtocol("v2", "mailroom.observation/v2", "mailroom.response/v2")
PROTOCOLS: dict[str, MailboxProtocol] = {p.version: p for p in (PROTOCOL_V1, PROTOCOL_V2)}
