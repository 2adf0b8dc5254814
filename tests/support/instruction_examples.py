"""The example documents of an actor instructions text: each a block of lines indented by
four spaces, opening with '{', read back by kind."""

from __future__ import annotations

import json
from typing import Any


def examples(text: str) -> list[str]:
    """Every example document: a block of lines indented by four spaces, opening with '{'."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("    ") and current is not None:
            current.append(line)
        elif line.startswith("    {"):
            current = [line]
            blocks.append(current)
        else:
            current = None
    return ["\n".join(block) for block in blocks]


def examples_by_kind(text: str, response_schema: str) -> dict[str, list[dict[str, Any]]]:
    """The example documents by kind: `feedback`, `response-<decision>` (a document of
    `response_schema`), else the document's own schema."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    for block in examples(text):
        doc = json.loads(block)
        if "rejected_sequence" in doc:
            kind = "feedback"
        elif doc.get("schema") == response_schema:
            kind = f"response-{doc['decision']}"
        else:
            kind = doc["schema"]
        kinds.setdefault(kind, []).append(doc)
    return kinds
