"""Debian's chromium driven by Playwright, headless: the `browser` fixture (a test module
uses it by name: `browser = browser_pages.browser`), and a page that keeps every console
message, page error and dialog it produced. A module that imports this one is skipped
where Playwright is not installed."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

playwright_api = pytest.importorskip("playwright.sync_api")

# Where screenshots are kept, to be looked at.
ARTIFACTS = REPO / "build" / "test-artifacts"
CHROMIUM = shutil.which("chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert CHROMIUM is not None, "Debian's chromium is not installed (make installs it)"
    with playwright_api.sync_playwright() as driver:
        # As root the browser's own sandbox cannot start; it only renders local files.
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


class Page:
    """A page with every console message and page error it produced."""

    def __init__(self, browser: Any, url: str) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.messages: list[tuple[str, str]] = []
        self.page.on("console", lambda m: self.messages.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.messages.append(("pageerror", str(e))))
        self.page.on("dialog", self._dialog)
        self.page.goto(url)
        self.page.wait_for_load_state("load")

    def _dialog(self, dialog: Any) -> None:
        """A dialog (alert, confirm, prompt) is a script that ran: kept, then dismissed."""
        self.messages.append(("dialog", str(dialog.message)))
        dialog.dismiss()

    def errors(self) -> list[tuple[str, str]]:
        return [m for m in self.messages if m[0] in ("error", "pageerror", "dialog")]

    def keep(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / name
        self.page.screenshot(path=str(shot), full_page=True)
        return shot
