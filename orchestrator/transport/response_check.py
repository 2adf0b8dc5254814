"""The loop's verdict on one response file, offline: what `mailroom check-response` gives.

The file is read and judged exactly as a claimed response is (`read_response_copy`, then
the frozen parser), so an actor's author sees the reason codes the loop would record.
"""

from __future__ import annotations

import json
from pathlib import Path

from mailroom.mailbox.claim import read_response_copy
from mailroom.mailbox.messages import OBSERVATION_SCHEMA, Observation, from_json
from mailroom.mailbox.messages_v2 import OBSERVATION_V2_SCHEMA, ObservationV2
from mailroom.mailbox.parser import (
    ActionLimits,
    Invalid,
    ProtocolError,
    ProtocolReason,
    decode_document,
    is_request_id,
    parse_response,
)
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.transport.published_action import response_limits
from pydantic import ValidationError

# Without an observation to match, any well-formed id the file carries is taken as
# the awaited one; a file without one is judged against this placeholder.
NO_REQUEST_ID = "0" * 32


class ObservationFileError(ValueError):
    """An observation given to check a response against that is not one; for people."""


def limits_of_observation(file: Path) -> tuple[str, int, ActionLimits]:
    """The request id, sequence and action limits an observation file (v1 or v2) holds
    its response to, exactly as the loop would (`response_limits`)."""
    try:
        data = file.read_bytes()
        document = json.loads(data)
    except (OSError, ValueError) as exc:
        raise ObservationFileError(f"cannot read {file} as JSON: {exc}") from exc
    kind = document.get("schema") if isinstance(document, dict) else None
    if kind not in (OBSERVATION_SCHEMA, OBSERVATION_V2_SCHEMA):
        known = f"{OBSERVATION_SCHEMA}, {OBSERVATION_V2_SCHEMA}"
        raise ObservationFileError(f"{file} is not an observation ({known})")
    errors = schema_errors(str(kind), document)
    if errors:
        raise ObservationFileError(f"{file} is not a valid {kind}: {errors[0][:200]}")
    observation: Observation | ObservationV2
    try:
        if kind == OBSERVATION_SCHEMA:
            observation = from_json(Observation, data)
        else:
            observation = from_json(ObservationV2, data)
    except ValidationError as exc:
        raise ObservationFileError(f"{file} is not a valid {kind}: {str(exc)[:200]}") from exc
    limits = response_limits(observation.action_spec)
    return observation.request_id, observation.sequence, limits


def check_file(
    file: Path,
    *,
    request_id: str | None,
    max_chunk: int,
    sequence: int | None,
    limits: ActionLimits | None = None,
) -> dict[str, object]:
    """The loop's verdict on `file`: outcome, reason codes and messages (held to
    `limits`, an observation's, or else protocol v1's with `max_chunk`)."""
    outcome: object
    expected_name = None if sequence is None else f"resp-{sequence}.json"
    if expected_name is not None and file.name != expected_name:
        outcome = ProtocolError(
            ProtocolReason.WRONG_FILE_NAME,
            f"the response for observation {sequence} must be named {expected_name}",
        )
    else:
        data = read_response_copy(file)
        if isinstance(data, ProtocolError):
            outcome = data
        else:
            expected = request_id
            if expected is None:
                value = decode_document(data)
                carried = value.get("request_id") if isinstance(value, dict) else None
                expected = carried if is_request_id(carried) else NO_REQUEST_ID
            outcome = parse_response(
                data,
                expected_request_id=expected,
                limits=ActionLimits(max_chunk=max_chunk) if limits is None else limits,
            )
    if isinstance(outcome, ProtocolError):
        return {
            "outcome": "protocol_error",
            "reasons": [outcome.reason.value],
            "messages": [outcome.message],
        }
    if isinstance(outcome, Invalid):
        return {
            "outcome": "invalid",
            "reasons": [i.code for i in outcome.issues],
            "messages": [i.message for i in outcome.issues],
        }
    return {"outcome": "accepted", "reasons": [], "messages": []}
