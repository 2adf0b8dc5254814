"""The one form of a time in the project's records: ISO 8601 UTC, milliseconds, `Z`.

Results (`started_at`, `finished_at`), the manifest's `created_at`, the audit's
`audited_at` and the `at` of disclosures and cutovers all meet the frozen schemas'
`format: date-time` (RFC 3339), and all sort as text in time order.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utc_timestamp(at: float | None = None) -> str:
    """`at` (seconds since the epoch; default now) as e.g. `2026-09-07T10:15:00.123Z`."""
    moment = datetime.now(UTC) if at is None else datetime.fromtimestamp(at, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
