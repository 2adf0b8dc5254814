"""The shared actor instructions, rendered with only the host and the opaque endpoint."""

from __future__ import annotations

import re
import socket

from mailroom.orchestrator.actors.profiles import actor_instructions_template

PLACEHOLDERS = frozenset({"host", "endpoint"})
# A text for protocol v2 (v3) also holds the family's own guide to its robot.
GUIDE_PLACEHOLDER = "actor_guide"
# Anything that looks like a template field: `{name}`.
FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def transport_host() -> str:
    return f"{socket.gethostname()} (local file mailbox)"


def template_fields(template: str) -> set[str]:
    return set(FIELD.findall(template))


def guide_handed(template: str, actor_guide: str | None) -> str | None:
    """The family's guide an actor is handed with `template`: only a text with a place
    for one (v3, for protocol v2) carries it."""
    return actor_guide if GUIDE_PLACEHOLDER in template_fields(template) else None


def render_instructions(
    endpoint: str,
    host: str | None = None,
    template: str | None = None,
    actor_guide: str | None = None,
) -> str:
    """One pass over the template: a substituted value is never substituted again.

    A template with any field other than `{host}` and `{endpoint}` (and `{actor_guide}`,
    exactly when a family's guide is given) is refused, so no other value can ever be
    slipped into what an actor reads.
    """
    text = actor_instructions_template() if template is None else template
    fields = template_fields(text)
    allowed = PLACEHOLDERS | ({GUIDE_PLACEHOLDER} if actor_guide is not None else set())
    unknown = fields - allowed
    if unknown:
        raise ValueError(f"unknown instruction placeholders: {sorted(unknown)}")
    if actor_guide is not None and GUIDE_PLACEHOLDER not in fields:
        raise ValueError("these instructions have no place for a family's actor guide")
    values = {"host": host if host is not None else transport_host(), "endpoint": endpoint}
    if actor_guide is not None:
        values[GUIDE_PLACEHOLDER] = actor_guide
    return FIELD.sub(lambda m: values[m.group(1)], text)
