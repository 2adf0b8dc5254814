"""`mailroom check-response`: validate a response file offline, as the loop would."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from mailroom.orchestrator.cli.exits import EXIT_FAILED, EXIT_OK
from mailroom.orchestrator.cli.options import console

# Without an observation to match, any well-formed id the file carries is taken as
# the awaited one; a file without one is judged against this placeholder.
NO_REQUEST_ID = "0" * 32


def check_file(
    file: Path, *, request_id: str | None, max_chunk: int, sequence: int | None
) -> dict[str, object]:
    """The loop's verdict on `file`: outcome, reason codes and messages."""
    from mailroom.mailbox.claim import read_response_copy
    from mailroom.mailbox.parser import (
        ActionLimits,
        Invalid,
        ProtocolError,
        ProtocolReason,
        decode_document,
        is_request_id,
        parse_response,
    )

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
                data, expected_request_id=expected, limits=ActionLimits(max_chunk=max_chunk)
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


@click.command("check-response")
@click.argument("file", type=click.Path(path_type=Path, exists=False))
@click.option("--request-id", default=None, help="The observation's request_id to match.")
@click.option("--max-chunk", type=click.IntRange(1, 64), default=5, show_default=True)
@click.option(
    "--sequence",
    type=click.IntRange(min=1),
    default=None,
    help="The observation's sequence: the file must then be named resp-<sequence>.json.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
def check_response(
    file: Path, request_id: str | None, max_chunk: int, sequence: int | None, as_json: bool
) -> None:
    """Validate a response file offline with the loop's own parser and reason codes.

    Exit status 0 when the loop would accept it, 1 otherwise.
    """
    report = check_file(file, request_id=request_id, max_chunk=max_chunk, sequence=sequence)
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        style = "green" if report["outcome"] == "accepted" else "red"
        console.print(f"[{style}]{report['outcome']}[/{style}]")
        reasons, messages = report["reasons"], report["messages"]
        assert isinstance(reasons, list) and isinstance(messages, list)
        for code, message in zip(reasons, messages, strict=True):
            console.print(f"  {code}: {message}", markup=False, highlight=False)
    sys.exit(EXIT_OK if report["outcome"] == "accepted" else EXIT_FAILED)
