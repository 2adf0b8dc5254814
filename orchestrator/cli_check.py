"""`mailroom check-response`: validate a response file offline, as the loop would."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .cli_common import console


@click.command("check-response")
@click.argument("file", type=click.Path(path_type=Path, exists=False))
@click.option("--request-id", default=None, help="The observation's request_id to match.")
@click.option("--max-chunk", type=int, default=5, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def check_response(file: Path, request_id: str | None, max_chunk: int, as_json: bool) -> None:
    """Validate a response file offline with the loop's own parser and reason codes."""
    from mailroom.mailbox.claim import read_response_copy
    from mailroom.mailbox.parser import ActionLimits, Invalid, ProtocolError, parse_response

    data = read_response_copy(file)
    if isinstance(data, ProtocolError):
        outcome: object = data
    else:
        expected = request_id
        if expected is None:
            # Without an observation to match, accept whatever well-formed id it carries.
            try:
                doc = json.loads(data.decode("utf-8"))
                rid = doc.get("request_id") if isinstance(doc, dict) else None
                expected = rid if isinstance(rid, str) else "0" * 32
            except (ValueError, UnicodeDecodeError):
                expected = "0" * 32
        outcome = parse_response(
            data, expected_request_id=expected, limits=ActionLimits(max_chunk=max_chunk)
        )
    if isinstance(outcome, ProtocolError):
        report = {
            "outcome": "protocol_error",
            "reasons": [outcome.reason.value],
            "messages": [outcome.message],
        }
    elif isinstance(outcome, Invalid):
        report = {
            "outcome": "invalid",
            "reasons": [i.code for i in outcome.issues],
            "messages": [i.message for i in outcome.issues],
        }
    else:
        report = {"outcome": "accepted", "reasons": [], "messages": []}
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        style = "green" if report["outcome"] == "accepted" else "red"
        console.print(f"[{style}]{report['outcome']}[/{style}]")
        for code, message in zip(report["reasons"], report["messages"], strict=True):
            console.print(f"  {code}: {message}")
    sys.exit(0 if report["outcome"] == "accepted" else 1)
