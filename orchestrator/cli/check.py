"""`mailroom check-response`: validate a response file offline, as the loop would.

The verdict is `orchestrator/transport/response_check.py`'s; here is how it is printed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from mailroom.orchestrator.cli.exits import EXIT_FAILED, EXIT_OK
from mailroom.orchestrator.cli.options import console, json_option


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
@click.option(
    "--observation",
    "observation",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="The observation it answers (v1 or v2): its request_id, sequence and action "
    "spec are then the ones checked.",
)
@json_option("Print the verdict as JSON.")
def check_response(
    file: Path,
    request_id: str | None,
    max_chunk: int,
    sequence: int | None,
    observation: Path | None,
    as_json: bool,
) -> None:
    """Validate a response file offline with the loop's own parser and reason codes.

    Without --observation it is checked as a protocol v1 response. Exit status 0 when
    the loop would accept it, 1 otherwise, 2 for an observation that is not one.
    """
    from mailroom.orchestrator.transport.response_check import (
        ObservationFileError,
        check_file,
        limits_of_observation,
    )

    limits = None
    if observation is not None:
        if request_id is not None or sequence is not None:
            raise click.UsageError("--observation gives the request id and sequence itself")
        try:
            request_id, sequence, limits = limits_of_observation(observation)
        except ObservationFileError as exc:
            raise click.BadParameter(str(exc), param_hint="--observation") from exc
    report = check_file(
        file, request_id=request_id, max_chunk=max_chunk, sequence=sequence, limits=limits
    )
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
