"""`mailroom view`: a run as a static HTML site, or served live on localhost."""

from __future__ import annotations

from pathlib import Path

import click
from mailroom.orchestrator.cli.options import console, run_dir_argument
from rich.markup import escape


@click.command()
@run_dir_argument()
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where the site goes (default: RUN_DIR/view).",
)
@click.option("--serve", is_flag=True, help="Serve the site on localhost, rebuilt as the run goes.")
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8000,
    show_default=True,
    help="With --serve: the port on 127.0.0.1 (0: any free port).",
)
def view(run_dir: Path, out: Path | None, serve: bool, port: int) -> None:
    """Write RUN_DIR as a self-contained static site: a run page (identity, success per
    suite with Wilson intervals, every attempt) and a page per attempt (both videos,
    each decision's images, raw response, verdict and feedback, the action chart).
    Everything an actor wrote is shown as text; the site loads nothing from the network.
    """
    from mailroom.orchestrator.viewer.site import build_site

    site = out or run_dir / "view"
    try:
        summary = build_site(run_dir, site)
    except (OSError, ValueError, KeyError) as exc:
        raise click.UsageError(f"cannot view {run_dir}: {exc}") from exc
    console.print(
        f"site of {summary.attempts} attempt(s): {escape(str(site / 'index.html'))}",
        highlight=False,
    )
    if not serve:
        return
    from mailroom.orchestrator.viewer.serve import LiveSite

    try:
        live = LiveSite(run_dir, site, port)
    except OSError as exc:
        raise click.UsageError(f"cannot serve on port {port}: {exc}") from exc
    try:
        live.serve_forever(
            lambda url: console.print(f"serving {url} (Ctrl-C stops)", highlight=False)
        )
    except KeyboardInterrupt:
        console.print("stopped")
