"""`mailroom view RUN_A RUN_B ...`: several runs compared in one static site.

    OUT/index.html                     the runs, their rates per suite with Wilson charts,
                                       every pair's exact McNemar result, the shared cases
    OUT/style.css, OUT/viewer.js       the site's own style and script
    OUT/runs/<key>/                    each run's own site, as `mailroom view RUN` writes it
    OUT/cases/<case>/index.html        one case's attempts of every run holding it, side by side

Written from the run directories alone; building again rewrites only what changed (a
live view rebuilds it while launches run).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mailroom.orchestrator.records.private import make_private_dir
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.viewer.assets import SCRIPT, STYLE
from mailroom.orchestrator.viewer.comparison_data import ComparisonData, read_comparison
from mailroom.orchestrator.viewer.comparison_pages import case_page, index_page
from mailroom.orchestrator.viewer.run_shape import run_shape
from mailroom.orchestrator.viewer.site import build_site, write_if_changed
from mailroom.orchestrator.viewer.timeline import AttemptTimeline, read_timeline

# The comparison pages' own additions to the run site's style sheet.
COMPARISON_STYLE = """
table.runs td, table.rates td, table.paired td, table.shared td { white-space: normal; }
table.runs th a { font-weight: 600; }
table.runs td, table.shared td { overflow-wrap: anywhere; }
table.runs { table-layout: fixed; width: 100%; }
svg.wilson { background: #fff; border: 1px solid #ddd; display: block; }
svg.wilson { max-width: 100%; height: auto; }
svg.wilson text { font-size: 11px; fill: #333; }
section.group { border-top: 2px solid #888; margin-top: 1.5em; }
section.pair { border-top: 1px solid #ccc; margin-top: 1em; }
.side-by-side { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr));
  gap: 1em; }
.attempt-column { min-width: 0; }
.settings { color: #333; }
"""


@dataclass(frozen=True)
class ComparisonSummary:
    out: Path
    runs: int
    pairs: int
    shared_cases: int
    live: bool


def _timelines(data: ComparisonData, case_ids: set[str]) -> dict[tuple[str, str], AttemptTimeline]:
    """Each shared case's counted attempt in each run holding it, read once per run."""
    found: dict[tuple[str, str], AttemptTimeline] = {}
    for run in data.runs:
        wanted = {
            run.attempts[case_id].attempt_id for case_id in case_ids if case_id in run.attempts
        }
        directory = RunDirectory(run.run_dir)
        shape = run_shape(directory, directory.read_manifest())
        for record in directory.attempts():
            if record.attempt_id in wanted:
                found[(run.key, record.case_id)] = read_timeline(record, shape)
    return found


def build_comparison_site(
    run_dirs: list[Path], out: Path, *, pair_across_settings: bool = False
) -> ComparisonSummary:
    """Write (or bring up to date) the comparison site of `run_dirs` under `out`.
    Raises `OSError`, `ValueError`, `KeyError` for a run that cannot be read."""
    data = read_comparison(run_dirs, pair_across_settings=pair_across_settings)
    make_private_dir(out)
    for run in data.runs:
        build_site(run.run_dir, out / "runs" / run.key)
    shared = {case.case_id for case in data.shared_cases}
    timelines = _timelines(data, shared)
    for case in data.shared_cases:
        folder = out / "cases" / case.case_id
        make_private_dir(folder)
        by_run = {key: timelines.get((key, case.case_id)) for key in case.runs}
        write_if_changed(folder / "index.html", case_page(data, case, by_run))
    write_if_changed(out / "style.css", STYLE + COMPARISON_STYLE)
    write_if_changed(out / "viewer.js", SCRIPT)
    write_if_changed(out / "index.html", index_page(data))
    return ComparisonSummary(
        out=out,
        runs=len(data.runs),
        pairs=sum(pair.comparison is not None for pair in data.pairs),
        shared_cases=len(data.shared_cases),
        live=data.live,
    )
