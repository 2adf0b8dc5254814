"""What each observation publishes of a family's action (`action_spec`) and what the
parser holds a response to, in the mailbox protocol the family speaks.

Protocol v1's spec fixes dimension, bounds and controller (its schema's constants); v2's
publishes them, and a response is checked against exactly what was published.
"""

from __future__ import annotations

from mailroom.mailbox.messages import ActionSpec
from mailroom.mailbox.messages_v2 import ActionSpecV2
from mailroom.mailbox.parser import ActionLimits
from mailroom.mailbox.protocol import PROTOCOL_V1, MailboxProtocol
from mailroom.orchestrator.sim import specs

PublishedActionSpec = ActionSpec | ActionSpecV2


def published_action(
    action: specs.ActionSpec, protocol: MailboxProtocol, *, replan_interval: int, max_chunk: int
) -> tuple[PublishedActionSpec, ActionLimits]:
    if protocol == PROTOCOL_V1:
        return (
            ActionSpec(
                layout=list(action.layout),
                control_hz=action.control_hz,
                replan_interval=replan_interval,
                max_chunk=max_chunk,
            ),
            ActionLimits(max_chunk=max_chunk),
        )
    published = ActionSpecV2(
        dimension=action.dimension,
        low=action.low,
        high=action.high,
        layout=list(action.layout),
        controller=action.controller,
        control_hz=action.control_hz,
        replan_interval=replan_interval,
        max_chunk=max_chunk,
    )
    limits = ActionLimits(
        max_chunk=max_chunk,
        low=action.low,
        high=action.high,
        dimension=action.dimension,
        response_schema=protocol.response_schema,
    )
    return published, limits
