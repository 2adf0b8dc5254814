"""The documentation site (mkdocs.yml, docs/) builds strictly, and reads right.

- `mkdocs build --strict` succeeds with no warning: a broken link, a missing anchor, a
  page of the nav that does not exist or a page left out of the nav fails it.
- The generated reference holds every command of the `mailroom` group and every exit
  code of `orchestrator/cli/exits.py`.
- README.md stays short (at most 110 lines) and links into the site.
- In a real browser (Debian's chromium, as the viewer's tests drive it), the home page,
  the tutorial and the command reference render their headings with no console error;
  a screenshot of each is kept in the test's folder.
"""

from __future__ import annotations

import html
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import browser_pages
import click
import pytest
from browser_pages import Page
from conftest import REPO
from mailroom.orchestrator.cli import exits
from mailroom.orchestrator.cli.main import main as cli_main
from mkdocs.config import load_config

# The viewer's browser tests' own helpers (tests/support/browser_pages.py): Debian's
# chromium driven by Playwright (the `browser` fixture, used by name), and a page that
# keeps its console messages.
browser = browser_pages.browser

README_MAX_LINES = 110
MKDOCS = Path(sys.executable).parent / "mkdocs"


def _nav_pages(nav: Any) -> Iterator[str]:
    """Every Markdown page the nav names."""
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_pages(value)


def _built_page(site: Path, page: str) -> Path:
    """The HTML file a page of docs/ is built into (directory URLs)."""
    stem = page.removesuffix(".md")
    if stem == "index":
        return site / "index.html"
    return site / stem / "index.html"


def _text(page: Path) -> str:
    """A built page's article, as text."""
    document = page.read_text(encoding="utf-8")
    article = document[document.index("<article") : document.index("</article>")]
    return html.unescape(re.sub(r"<[^>]+>", " ", article))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    output = built.stdout + built.stderr
    assert built.returncode == 0, output[-5000:]
    assert "WARNING" not in output, output[-5000:]
    return out


def test_every_page_of_the_nav_is_built(site: Path) -> None:
    config = load_config(config_file=str(REPO / "mkdocs.yml"))
    pages = list(_nav_pages(config["nav"]))
    assert "index.md" in pages and "tutorial.md" in pages and "reference/cli.md" in pages
    for page in pages:
        assert (REPO / "docs" / page).is_file(), page
        assert _built_page(site, page).is_file(), page


def test_the_command_reference_holds_every_command(site: Path) -> None:
    assert isinstance(cli_main, click.Group)
    text = _text(site / "reference" / "cli" / "index.html")
    commands = sorted(cli_main.commands)
    assert len(commands) >= 10
    for name in commands:
        assert f"mailroom {name}" in text, name
        command = cli_main.commands[name]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.opts[0] in text, (name, param.opts[0])
    assert "Sentinel" not in text  # click's marker for "no default" is not a default


def test_the_exit_code_reference_holds_every_code(site: Path) -> None:
    page = (site / "reference" / "exit-codes" / "index.html").read_text(encoding="utf-8")
    codes = {n: v for n, v in vars(exits).items() if n.startswith("EXIT_")}
    assert len(codes) >= 10
    for name, value in codes.items():
        row = re.search(rf"<tr>\s*<td[^>]*>{value}</td>\s*<td[^>]*><code>{name}</code>", page)
        assert row is not None, name


def test_the_generated_reference_pages_hold_their_sources(site: Path) -> None:
    run_directory = _text(site / "reference" / "run-directory" / "index.html")
    for name in ("manifest.json", "events.jsonl", "result.json", "steps.jsonl"):
        assert name in run_directory
    schemas = _text(site / "reference" / "schemas" / "index.html")
    for schema in sorted((REPO / "schemas").glob("mailroom.*.json")):
        assert schema.name in schemas, schema.name
        assert (site / "reference" / "schemas" / schema.name).read_bytes() == schema.read_bytes()
    profile = _text(site / "reference" / "profile" / "index.html")
    for field in ("method_family", "persistence_rule", "memory_mb", "pass_env", "model_arguments"):
        assert field in profile, field
    report = _text(site / "reference" / "report" / "index.html")
    for term in ("success_rate_over_selected", "unattempted", "no_gateway"):
        assert term in report, term


def test_the_readme_is_short_and_links_into_the_site() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    assert "make demo" in readme and "make test" in readme
    links = re.findall(r"\]\((docs/[^)#]+\.md)(?:#[^)]*)?\)", readme)
    assert len(links) >= 5, links
    for link in links:
        assert (REPO / link).is_file(), link


# --- in a real browser ---------------------------------------------------------------


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (its search index is fetched by script)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=site,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the site's server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize(
    ("path", "heading", "shot"),
    [
        ("/", "mailroom", "home.png"),
        ("/tutorial/", "Tutorial: a first campaign", "tutorial.png"),
        ("/reference/cli/", "Commands", "reference-cli.png"),
    ],
)
def test_the_site_renders_in_a_browser(
    served: str,
    browser: Any,
    tmp_path: Path,
    path: str,
    heading: str,
    shot: str,
) -> None:
    page = Page(browser, served + path)
    page.page.wait_for_load_state("networkidle")
    title = page.page.locator("article h1").first
    assert title.inner_text().strip().rstrip("¶").strip() == heading
    assert page.page.locator("nav.md-nav").count() > 0
    page.page.screenshot(path=str(tmp_path / shot), full_page=False)
    assert (tmp_path / shot).stat().st_size > 0
    assert page.errors() == []
