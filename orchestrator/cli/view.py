"""`mailroom view`: a run as a static HTML site, or several runs compared in one; either
served live on localhost."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click
from mailroom.orchestrator.cli.options import console
from rich.markup import escape


def _build_one(run_dir: Path, site: Path) -> Callable[[], object]:
    from mailroom.orchestrator.viewer.site import build_site

    try:
        summary = build_site(run_dir, site)
    except (OSError, ValueError, KeyError) as exc:
        raise click.UsageError(f"cannot view {run_dir}: {exc}") from exc
    console.print(
        f"site of {summary.attempts} attempt(s): {escape(str(site / 'index.html'))}",
        highlight=False,
    )
    return lambda: build_site(run_dir, site)


def _build_several(run_dirs: list[Path], site: Path, pair_across: bool) -> Callable[[], object]:
    from mailroom.orchestrator.viewer.comparison_site import build_comparison_site

    def build() -> object:
        return build_comparison_site(run_dirs, site, pair_across_settings=pair_across)

    try:
        summary = build_comparison_site(run_dirs, site, pair_across_settings=pair_across)
    except (OSError, ValueError, KeyError) as exc:
        raise click.UsageError(f"cannot view these runs: {exc}") from exc
    console.print(
        f"comparison of {summary.runs} runs ({summary.pairs} pair(s) compared, "
        f"{summary.shared_cases} shared case(s)): {escape(str(site / 'index.html'))}",
        highlight=False,
    )
    return build


@click.command()
@click.argument(
    "run_dirs",
    nargs=-1,
    required=True,
    metavar="RUN_DIR [RUN_DIR ...]",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where the site goes (default: RUN_DIR/view; required with several runs).",
)
@click.option(
    "--pair-across-settings",
    is_flag=True,
    help="With several runs: also pair runs whose protocol settings or plan cases differ "
    "(the differences are named); by default they are shown apart and never paired.",
)
@click.option("--serve", is_flag=True, help="Serve the site on localhost, rebuilt as the runs go.")
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8000,
    show_default=True,
    help="With --serve: the port on 127.0.0.1 (0: any free port).",
)
def view(
    run_dirs: tuple[Path, ...], out: Path | None, pair_across_settings: bool, serve: bool, port: int
) -> None:
    """Write RUN_DIR as a self-contained static site: a run page (identity, success per
    suite with Wilson intervals, every attempt) and a page per attempt (both videos,
    each decision's images, raw response, verdict and feedback, the action chart).

    With several RUN_DIRs, one site compares them: the runs and their settings, each
    run's success rates per suite with Wilson intervals drawn, decision latency and wall
    time, the exact McNemar result of every pair of runs measured under the same protocol
    settings (as `mailroom compare`), and each shared case's attempts side by side; each
    run's own site is under runs/. Everything an actor wrote is shown as text; the site
    loads nothing from the network.
    """
    if len(run_dirs) == 1:
        site = out or run_dirs[0] / "view"
        build = _build_one(run_dirs[0], site)
    else:
        if out is None:
            raise click.UsageError("several runs need --out DIR: where their comparison goes")
        resolved = [run_dir.resolve() for run_dir in run_dirs]
        if len(set(resolved)) != len(resolved):
            raise click.UsageError("a run directory is given twice")
        site = out
        build = _build_several(list(run_dirs), site, pair_across_settings)
    if not serve:
        return
    from mailroom.orchestrator.viewer.serve import LiveSite

    try:
        live = LiveSite(run_dirs, site, port, build)
    except OSError as exc:
        raise click.UsageError(f"cannot serve on port {port}: {exc}") from exc
    try:
        live.serve_forever(
            lambda url: console.print(f"serving {url} (Ctrl-C stops)", highlight=False)
        )
    except KeyboardInterrupt:
        console.print("stopped")
