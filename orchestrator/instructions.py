"""The shared actor instructions, rendered with only the host and the opaque endpoint."""

from __future__ import annotations

import re
import socket

from .paths import actor_instructions_template

PLACEHOLDER = re.compile(r"\{(host|endpoint)\}")


def transport_host() -> str:
    return f"{socket.gethostname()} (local file mailbox)"


def render_instructions(endpoint: str, host: str | None = None, template: str | None = None) -> str:
    """One pass over the template: a substituted value is never substituted again."""
    text = actor_instructions_template() if template is None else template
    values = {"host": host if host is not None else transport_host(), "endpoint": endpoint}
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], text)
