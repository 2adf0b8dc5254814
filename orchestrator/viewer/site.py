"""`mailroom view`: a run directory as a self-contained static site.

    OUT/index.html                       the run page
    OUT/style.css, OUT/viewer.js         the site's own style and filter script
    OUT/attempts/<attempt>/index.html    one page per attempt
    OUT/attempts/<attempt>/observations  the delivered images, copied
    OUT/attempts/<attempt>/videos        both camera videos, copied (H.264 in MP4, which
                                         Debian's Chromium plays: tests/test_viewer_browser.py)

The site loads nothing from the network and is written from the run directory alone;
building it again rewrites only what changed (a live view rebuilds it as a run goes on).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from mailroom.mailbox.publish import publish_bytes
from mailroom.orchestrator.campaign.run_directory import RunDirectory
from mailroom.orchestrator.episode.evidence import make_private_dir
from mailroom.orchestrator.replay.diagnostics import read_diagnostics
from mailroom.orchestrator.results.reporter import build_report
from mailroom.orchestrator.viewer.assets import SCRIPT, STYLE
from mailroom.orchestrator.viewer.pages import attempt_page, attempt_row, run_page
from mailroom.orchestrator.viewer.timeline import AttemptTimeline, read_timeline

SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


@dataclass(frozen=True)
class SiteSummary:
    out: Path
    attempts: int
    pages_written: int
    live: bool


def _write_if_changed(path: Path, text: str) -> bool:
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


def build_site(run_dir: Path, out: Path) -> SiteSummary:
    """Write (or bring up to date) the site of `run_dir` under `out`."""
    run = RunDirectory(run_dir)
    if not run.exists():
        raise FileNotFoundError(f"{run_dir} holds no manifest.json: not a run directory")
    make_private_dir(out)
    live = run.in_use()
    report = build_report(run_dir)
    superseded = set(report.superseded_attempts)
    written = 0
    rows = []
    records = [r for r in run.attempts() if SAFE_NAME.match(r.attempt_id)]
    for record in records:
        folder = out / "attempts" / record.attempt_id
        make_private_dir(folder)
        timeline = read_timeline(record)
        _copy_media(timeline, folder)
        running = live and timeline.result is None
        page = attempt_page(timeline, live=running, diagnostics=read_diagnostics(record.directory))
        written += _write_if_changed(folder / "index.html", page)
        rows.append(attempt_row(timeline, latest=record.attempt_id not in superseded))
    written += _write_if_changed(out / "style.css", STYLE)
    written += _write_if_changed(out / "viewer.js", SCRIPT)
    manifest = run.read_manifest()
    written += _write_if_changed(out / "index.html", run_page(report, manifest, rows, live=live))
    return SiteSummary(out=out, attempts=len(records), pages_written=written, live=live)
