"""What each observation publishes of a family's action (`action_spec`) and what the
parser holds a response to, in the mailbox protocol the family speaks.

Protocol v1's spec fixes dimension, bounds and controller (its schema's constants); v2's
publishes them, and a response is checked against exactly what was published.
"""

from __future__ import annotations

from mailroom.mailbox.messages import ActionSpec
from mailroom.mailbox.messages_v2 import ActionSpecV2
from mailroom.mailbox.parser import ActionLimits
from mailroom.mailbox.protocol import PROTOCOL_V1, PROTOCOL_V2, MailboxProtocol
from mailroom.orchestrator.sim import specs

PublishedActionSpec = ActionSpec | ActionSpecV2


def response_limits(spec: PublishedActionSpec) -> ActionLimits:
    """What a response answering an observation that published `spec` is held to."""
    if isinstance(spec, ActionSpec):
        return ActionLimits(max_chunk=spec.max_chunk)
    return ActionLimits(
        max_chunk=spec.max_chunk,
        low=spec.low,
        high=spec.high,
        dimension=spec.dimension,
        response_schema=PROTOCOL_V2.response_schema,
    )


def published_action(
    action: specs.ActionSpec, protocol: MailboxProtocol, *, replan_interval: int, max_chunk: int
) -> tuple[PublishedActionSpec, ActionLimits]:
    published: PublishedActionSpec
    if protocol == PROTOCOL_V1:
        published = ActionSpec(
            layout=list(action.layout),
            control_hz=action.control_hz,
            replan_interval=replan_interval,
            max_chunk=max_chunk,
        )
        return published, response_limits(published)
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
    return published, response_limits(published)
