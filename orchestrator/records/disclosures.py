"""Which attempts of a run were disclosed as not blinded, as its run events record it.

A disclosure is recorded by `mailroom disclose` (audit/disclosure.py); reports, exports,
comparisons and the scheduler read it here.
"""

from __future__ import annotations

from mailroom.orchestrator.records.run_directory import RunDirectory

# The run event (and the line in the attempt's own disclosures) that says a leak reached
# the attempt's actor.
LEAK_DISCLOSED = "leak_disclosed"


def disclosed_attempts(run: RunDirectory) -> set[str]:
    """Every attempt a `leak_disclosed` event names: not blinded, never retried."""
    return {e["attempt_id"] for e in run.events() if e.get("event") == LEAK_DISCLOSED}
