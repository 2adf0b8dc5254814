"""An attempt's `provider-requests.jsonl` read back for an export: one row per model
request the provider gateway saw (`gateway/ledger.py` writes it; never a body or a
header), and the Parquet schema those rows are exported in.

The file is the orchestrator's own, but its model names and reasons carry what an
actor's provider answered, so every line is checked before it is kept: a line that is
not a request record makes the whole file untrusted (skipped, and said), as a steps file
is. A torn last line (the writer stopped mid-line) is dropped. When the attempt's result
says what the gateway metered, the file must hold as many forwarded and refused requests
as the result counts, or it is skipped too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import pyarrow as pa
from mailroom.orchestrator.gateway.ledger import Outcome
from mailroom.orchestrator.records.result import ProviderUsage, Usage
from pydantic import BaseModel, ConfigDict, Field, ValidationError

NonNegative = Annotated[int, Field(ge=0)]
Milliseconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Text = Annotated[str, Field(max_length=4000)]


class RequestsFileError(ValueError):
    """A provider-requests.jsonl that does not hold what the gateway writes; skipped."""


class RequestLine(BaseModel):
    """One line of provider-requests.jsonl, as the gateway's ledger writes it (fields it
    may add later are passed over)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    t: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    event: Literal["provider_request"]  # the ledger's REQUEST_EVENT
    decision: NonNegative
    method: Annotated[str, Field(max_length=16)]
    route: Text
    outcome: Outcome
    reason: Text | None
    status: Annotated[int, Field(ge=0, le=999)] | None
    requested_model: Text | None = None
    answered_model: Text | None = None
    input_tokens: NonNegative | None = None
    output_tokens: NonNegative | None = None
    cache_read_tokens: NonNegative | None = None
    cache_write_tokens: NonNegative | None = None
    server_tool_uses: NonNegative | None = None
    complete: bool = False
    cost: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    cost_note: Text | None = None
    first_byte_ms: Milliseconds | None = None
    total_ms: Milliseconds = 0.0
    request_bytes: NonNegative = 0
    response_bytes: NonNegative = 0


# The per-request table's columns, in order: the episode (as in episodes.parquet), the
# request's place in its file, then the ledger's fields (cost as cost_usd).
REQUEST_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("episode_index", pa.int64()),
    ("attempt_id", pa.string()),
    ("request_index", pa.int64()),
    ("finished_unix_s", pa.float64()),
    ("decision", pa.int64()),
    ("method", pa.string()),
    ("route", pa.string()),
    ("outcome", pa.string()),
    ("reason", pa.string()),
    ("status", pa.int64()),
    ("requested_model", pa.string()),
    ("answered_model", pa.string()),
    ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("cache_read_tokens", pa.int64()),
    ("cache_write_tokens", pa.int64()),
    ("server_tool_uses", pa.int64()),
    ("complete", pa.bool_()),
    ("cost_usd", pa.float64()),
    ("cost_note", pa.string()),
    ("first_byte_ms", pa.float64()),
    ("total_ms", pa.float64()),
    ("request_bytes", pa.int64()),
    ("response_bytes", pa.int64()),
)


def requests_schema() -> pa.Schema:
    return pa.schema(
        [pa.field(name, kind, nullable=name != "episode_index") for name, kind in REQUEST_COLUMNS]
    )


@dataclass(frozen=True)
class AttemptRequests:
    """One attempt's request lines, in the order the gateway ended them."""

    lines: list[RequestLine]

    def rows(self, episode_index: int, attempt_id: str) -> list[dict[str, Any]]:
        return [
            {
                "episode_index": episode_index,
                "attempt_id": attempt_id,
                "request_index": n,
                "finished_unix_s": line.t,
                **line.model_dump(exclude={"t", "event", "cost"}),
                "cost_usd": line.cost,
            }
            for n, line in enumerate(self.lines)
        ]


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def read_requests(path: Path, usage: Usage | ProviderUsage) -> AttemptRequests | None:
    """The attempt's request lines, None without a file; raises RequestsFileError for a
    file that cannot be trusted (`usage`: the attempt's result's, checked against it)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RequestsFileError(f"unreadable: {exc.strerror or exc}") from exc
    parts = data.split(b"\n")
    parts.pop()  # after the final newline, or a torn remainder
    lines: list[RequestLine] = []
    for number, raw in enumerate(parts, start=1):
        try:
            record = json.loads(raw, parse_constant=_no_constants)
            lines.append(RequestLine.model_validate(record))
        except ValueError as exc:  # not JSON, or not a request record
            what = "not a request record" if isinstance(exc, ValidationError) else "not JSON"
            raise RequestsFileError(f"line {number}: {what}") from exc
    if isinstance(usage, ProviderUsage):
        refused = sum(line.outcome == "refused" for line in lines)
        forwarded = len(lines) - refused
        if (forwarded, refused) != (usage.provider_requests, usage.refused_requests):
            raise RequestsFileError(
                f"{forwarded} forwarded and {refused} refused requests, where the result "
                f"counts {usage.provider_requests} and {usage.refused_requests}"
            )
    return AttemptRequests(lines)
