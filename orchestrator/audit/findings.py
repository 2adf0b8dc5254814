"""The matching: a text an actor could read, searched for the run's private identifiers,
and each find judged by where its text came from.

What is private and how it is found in a text is `patterns.py`; here each find becomes a
leak, or information when an actor wrote itself what it could know untold, kept once per
attempt, place, source and kind, beside the attempts that could not be verified and the
count of files read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mailroom.orchestrator.audit.patterns import Identifiers, information_kind
from mailroom.orchestrator.records.audit_verdict import (
    MAX_WHERE,
    IdentifierKind,
    Information,
    InformationKind,
    Leak,
    Source,
    Unverifiable,
)


@dataclass
class Findings:
    """What an audit found so far: each leak and each piece of information once per
    attempt and place, the attempts it could not verify, and the files it read."""

    leaks: dict[tuple[str, str, Source, IdentifierKind], Leak] = field(default_factory=dict)
    information: dict[tuple[str, str, InformationKind], Information] = field(default_factory=dict)
    unverifiable: list[Unverifiable] = field(default_factory=list)
    files: int = 0

    def found(
        self, attempt_id: str, where: str, kind: IdentifierKind, text: str, source: Source
    ) -> None:
        """A leak, or information where the actor wrote what it could know untold."""
        attempt_id, where = attempt_id[:300], where[:MAX_WHERE]
        untold = information_kind(kind, source)
        if untold is not None:
            key = (attempt_id, where, untold)
            if key not in self.information:
                self.information[key] = Information(
                    attempt_id=attempt_id,
                    where=where,
                    kind=untold,
                    excerpt=text,
                    source="actor_written",
                )
        elif (attempt_id, where, source, kind) not in self.leaks:
            self.leaks[attempt_id, where, source, kind] = Leak(
                attempt_id=attempt_id,
                where=where,
                identifier_kind=kind,
                excerpt=text,
                source=source,
            )

    def cannot_verify(self, attempt_id: str, reason: str) -> None:
        self.unverifiable.append(Unverifiable(attempt_id=attempt_id[:300], reason=reason[:500]))


@dataclass(frozen=True)
class AttemptScan:
    """One attempt's matching: each text searched for the run's identifiers (the
    attempt's own task instruction blanked), each find kept in `findings`."""

    attempt_id: str
    identifiers: Identifiers
    instruction: str | None
    findings: Findings

    def text(self, where: str, text: str, *, source: Source) -> None:
        for kind, shown in self.identifiers.find(
            text, instruction=self.instruction, actor_written=source == "actor_written"
        ):
            self.findings.found(self.attempt_id, where, kind, shown, source)
