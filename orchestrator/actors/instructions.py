"""The shared actor instructions, rendered with only the host and the opaque endpoint."""

from __future__ import annotations

import re
import socket

from mailroom.orchestrator.actors.profiles import actor_instructions_template

PLACEHOLDERS = frozenset({"host", "endpoint"})
# Anything that looks like a template field: `{name}`.
FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def transport_host() -> str:
    return f"{socket.gethostname()} (local file mailbox)"


def template_fields(template: str) -> set[str]:
    return set(FIELD.findall(template))


def render_instructions(endpoint: str, host: str | None = None, template: str | None = None) -> str:
    """One pass over the template: a substituted value is never substituted again.

    A template with any field other than `{host}` and `{endpoint}` is refused, so no
    other value can ever be slipped into what an actor reads.
    """
    text = actor_instructions_template() if template is None else template
    unknown = template_fields(text) - PLACEHOLDERS
    if unknown:
        raise ValueError(f"unknown instruction placeholders: {sorted(unknown)}")
    values = {"host": host if host is not None else transport_host(), "endpoint": endpoint}
    return FIELD.sub(lambda m: values[m.group(1)], text)
