"""`mailroom view`: a run directory as a self-contained static site.

    OUT/index.html                       the run page
    OUT/style.css, OUT/viewer.js         the site's own style and filter script
    OUT/attempts/<attempt>/index.html    one page per attempt
    OUT/attempts/<attempt>/observations  the delivered images, copied
    OUT/attempts/<attempt>/videos        both camera videos, copied (H.264 in MP4, which
                                         Debian's Chromium plays:
                                         tests/browser/test_viewer_browser.py)

When the run's profile declares that its actor's standard output is the agent's own account
of its work (`"actor": {"trace": ...}`), each policy call also shows the steps of that
account placed beside it (orchestrator/actors/agent_trace.py: a reading aid, not evidence).

The site loads nothing from the network and is written from the run directory alone;
building it again rewrites only what changed (a live view rebuilds it as a run goes on).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from mailroom.mailbox.publish import publish_bytes
from mailroom.orchestrator.actors.agent_trace import declared_trace, read_trace, trace_parsers
from mailroom.orchestrator.records.private import make_private_dir
from mailroom.orchestrator.records.run_directory import RunDirectory, not_a_run_directory
from mailroom.orchestrator.replay.diagnostics import read_diagnostics
from mailroom.orchestrator.results.reporter import build_report
from mailroom.orchestrator.viewer.assets import SCRIPT, STYLE
from mailroom.orchestrator.viewer.attempt_page import attempt_page
from mailroom.orchestrator.viewer.run_page import attempt_row, run_page
from mailroom.orchestrator.viewer.run_shape import run_shape
from mailroom.orchestrator.viewer.timeline import AttemptTimeline, read_timeline

SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


@dataclass(frozen=True)
class SiteSummary:
    out: Path
    attempts: int
    pages_written: int
    live: bool


def write_if_changed(path: Path, text: str) -> bool:
    data = text.encode("utf-8")
    if path.is_file() and path.read_bytes() == data:
        return False
    publish_bytes(path, data, durable=False)
    return True


def _copy_if_changed(source: Path, target: Path) -> None:
    try:
        same = target.stat().st_size == source.stat().st_size and (
            target.stat().st_mtime >= source.stat().st_mtime
        )
    except FileNotFoundError:
        same = False
    if not same:
        make_private_dir(target.parent)
        shutil.copyfile(source, target)


def _copy_media(timeline: AttemptTimeline, folder: Path) -> None:
    """Copy what the page shows into the site, at the names the timeline gives."""
    for decision in timeline.decisions:
        for name in decision.images.values():
            _copy_if_changed(timeline.directory / name, folder / name)
    for name in timeline.videos.values():
        _copy_if_changed(timeline.directory / name, folder / name)


def _account_note(trace_format: str | None, unreadable: int, attempts: int) -> str | None:
    """The run page's word on the agents' own accounts, where one cannot be read."""
    if trace_format is None:
        return None
    if trace_format not in trace_parsers():
        return (
            f"the profile declares the actor's own account in the format {trace_format!r}, "
            "which this viewer does not read: each attempt's captured output is shown as it is"
        )
    if unreadable:
        return (
            f"the actor's own account ({trace_format}) could not be read for {unreadable} of "
            f"{attempts} attempts: their captured output is shown as it is"
        )
    return None


def build_site(run_dir: Path, out: Path) -> SiteSummary:
    """Write (or bring up to date) the site of `run_dir` under `out`."""
    run = RunDirectory(run_dir)
    if not run.exists():
        raise FileNotFoundError(not_a_run_directory(run_dir))
    make_private_dir(out)
    live = run.in_use()
    report = build_report(run_dir)
    superseded = set(report.superseded_attempts)
    not_blinded = set(report.not_blinded_attempts)
    manifest = run.read_manifest()
    shape = run_shape(run, manifest)
    trace_format = declared_trace(manifest)
    unreadable = 0
    written = 0
    rows = []
    records = [r for r in run.attempts() if SAFE_NAME.match(r.attempt_id)]
    for record in records:
        folder = out / "attempts" / record.attempt_id
        make_private_dir(folder)
        timeline = read_timeline(record, shape)
        _copy_media(timeline, folder)
        running = live and timeline.result is None
        trace = None if trace_format is None else read_trace(record.directory, trace_format)
        unreadable += int(trace is not None and not trace.readable and not running)
        page = attempt_page(
            timeline,
            live=running,
            diagnostics=read_diagnostics(record.directory),
            trace_format=trace_format,
            trace=trace,
        )
        written += write_if_changed(folder / "index.html", page)
        rows.append(
            attempt_row(
                timeline,
                latest=record.attempt_id not in superseded,
                blinded=record.attempt_id not in not_blinded,
            )
        )
    written += write_if_changed(out / "style.css", STYLE)
    written += write_if_changed(out / "viewer.js", SCRIPT)
    note = _account_note(trace_format, unreadable, len(records))
    written += write_if_changed(
        out / "index.html", run_page(report, manifest, rows, live=live, account_note=note)
    )
    return SiteSummary(out=out, attempts=len(records), pages_written=written, live=live)
