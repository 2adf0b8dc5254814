"""Run by inspect_scout's own venv (`make clients`), never by mailroom's: import every ATIF
trajectory below a folder with inspect_scout's ATIF source, as `scout import` does, and
write out the transcripts it made, for `scout_client.py` to compare with the export.

    python scout_importer.py EXPORT_DIR OUT.json

Every warning the import logs is kept: a trajectory it skipped as malformed, an image it
could not load, a file it took for a trajectory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

from inspect_scout.sources._atif import atif


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}"[:2000])


def _content(content: Any) -> list[dict[str, Any]]:
    """A message's content as parts: text, or an image (its data URI's kind and length)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    parts: list[dict[str, Any]] = []
    for part in content:
        if part.type == "image":
            parts.append({"type": "image", "uri": part.image[:40], "length": len(part.image)})
        elif part.type == "reasoning":
            parts.append({"type": "reasoning", "text": part.reasoning})
        else:
            parts.append({"type": part.type, "text": getattr(part, "text", None)})
    return parts


def _message(message: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"role": message.role, "content": _content(message.content)}
    if message.role == "assistant":
        found["model"] = message.model
        found["tool_calls"] = [
            {"id": c.id, "function": c.function, "arguments": c.arguments}
            for c in message.tool_calls or []
        ]
    if message.role == "tool":
        found["tool_call_id"] = message.tool_call_id
        found["function"] = message.function
    return found


def _event(event: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"event": event.event, "timestamp": str(event.timestamp)}
    if event.event == "model":
        usage = event.output.usage
        found.update(
            model=event.model,
            inputs=len(event.input),
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            cache_read=usage.input_tokens_cache_read,
            cost=usage.total_cost,
        )
    return found


async def _import(root: Path) -> list[dict[str, Any]]:
    transcripts = []
    async for transcript in atif(path=root):
        transcripts.append(
            {
                "transcript_id": transcript.transcript_id,
                "source_type": transcript.source_type,
                "source_id": transcript.source_id,
                "source_uri": transcript.source_uri,
                "date": str(transcript.date) if transcript.date else None,
                "agent": transcript.agent,
                "model": transcript.model,
                "message_count": transcript.message_count,
                "total_tokens": transcript.total_tokens,
                "total_time": transcript.total_time,
                "metadata": transcript.metadata,
                "messages": [_message(m) for m in transcript.messages],
                "events": [_event(e) for e in transcript.events],
            }
        )
    return transcripts


def main(root: Path, out: Path) -> None:
    kept = _Kept()
    logging.getLogger().addHandler(kept)
    transcripts = asyncio.run(_import(root))
    document = {"transcripts": transcripts, "warnings": kept.messages}
    out.write_text(json.dumps(document, default=str), "utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
