"""What the audit reads of an attempt's records: where its endpoint was and which case it
ran, the argv and environment its actor was started with, and the web searches its model
provider ran for it.

An attempt is located by its endpoint mapping (written before any instructions exist:
without it, nothing of the attempt was handed to anyone). An actor's argv is read
structured, or from the process repr an earlier run recorded; its environment as
recorded, or else the scrubbed one every actor is given.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailroom.orchestrator.actors.process import scrubbed_environment
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.entries import CatalogError
from mailroom.orchestrator.families.registry import catalog_entry
from mailroom.orchestrator.gateway.ledger import REQUEST_EVENT as PROVIDER_REQUEST_EVENT
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import ENDPOINT_FILE, AttemptPaths
from mailroom.orchestrator.records.run_directory import AttemptRecord
from pydantic import ValidationError

_ARGV_IN_REPR = re.compile(r"argv=(\[.*\])\)\s*$", re.DOTALL)


def read_json(path: Path) -> Any:
    """A recorded JSON document (the endpoint mapping, the launch message)."""
    return json.loads(path.read_text(encoding="utf-8"))


def actor_started(directory: Path) -> dict[str, Any] | None:
    """The attempt's `actor_started` event, or None when no actor started."""
    started = read_log(AttemptPaths(directory).events, kinds=("actor_started",)).records
    return started[0] if started else None


def argv_text(event: dict[str, Any]) -> str:
    """The actor's argv: structured if recorded so, else parsed from the process repr.

    An unparseable repr is searched whole: the actor may have seen any of it.
    """
    argv = event.get("argv")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        detail = str(event.get("detail", ""))
        match = _ARGV_IN_REPR.search(detail)
        try:
            argv = ast.literal_eval(match.group(1)) if match else None
        except (ValueError, SyntaxError):
            argv = None
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
            return detail
    return "\n".join(argv)


def env_text(event: dict[str, Any], endpoint: Path | None) -> str | None:
    """The actor's environment as text: as recorded, else the scrubbed one every actor
    is given; None with neither."""
    env = event.get("env")
    if isinstance(env, dict):
        return "\n".join(f"{k}={v}" for k, v in sorted(env.items()))
    if endpoint is None:
        return None
    scrubbed = scrubbed_environment(endpoint / "scratch")  # what actor_process gives
    return "\n".join(f"{k}={v}" for k, v in sorted(scrubbed.items()))


@dataclass(frozen=True)
class RecordedAttempt:
    """An attempt as its records locate it: its case, its endpoint, or why not."""

    record: AttemptRecord
    case: Case | None
    endpoint: Path | None
    problem: str | None
    # The mapping is written before any instructions exist: without it and without a
    # launch message or an actor, nothing of this attempt was ever handed to anyone.
    mapped: bool = True


def locate_attempt(record: AttemptRecord, plan_cases: dict[str, Case]) -> RecordedAttempt:
    """Where the attempt's endpoint was and which case it ran, by its endpoint mapping;
    the plan's case where the mapping is missing or unreadable."""
    mapping = AttemptPaths(record.directory).endpoint_mapping
    case = plan_cases.get(record.case_id)
    if not mapping.exists():
        return RecordedAttempt(
            record, case, None, f"no {ENDPOINT_FILE}: its endpoint cannot be located", mapped=False
        )
    try:
        document = read_json(mapping)
        endpoint = Path(document["endpoint"])
        case = Case.model_validate(document["case"])
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
        return RecordedAttempt(record, case, None, f"{ENDPOINT_FILE} is unreadable: {exc}")
    return RecordedAttempt(record, case, endpoint, None)


def instruction_of(case: Case | None) -> str | None:
    """The case's task instruction (public: blanked in the search), or None."""
    if case is None:
        return None
    try:
        return catalog_entry(case.suite, case.task_index).instruction
    except CatalogError:
        return None


def provider_web_searches(ledger: Path) -> int:
    """Server-side tool uses (a provider's web search) the gateway metered for an
    attempt's actor (`provider-requests.jsonl`; none without a gateway)."""
    total = 0
    for record in read_log(ledger, kinds=(PROVIDER_REQUEST_EVENT,)).records:
        uses = record.get("server_tool_uses")
        if isinstance(uses, int) and not isinstance(uses, bool) and uses > 0:
            total += uses
    return total
