"""Whether a page of a site `mailroom view` wrote reads as a page, in a real browser at
1280x800 (the `browser` fixture of tests/support/browser_pages.py): it fits the window
(nothing wider than it outside a box meant to scroll), its own text shows no Python repr
and no long duration in ms, and the action chart's legend leaves its native-success
label clear. A screenshot of each page read is kept in build/test-artifacts/."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from browser_pages import ARTIFACTS

VIEWPORT = {"width": 1280, "height": 800}

# What no page may show outside an actor's words: Python's words for yes, no and nothing,
# a dict's or list's repr, a float that is not a number, and ten seconds or more in ms.
REPR = re.compile(
    r"\b(?:True|False|None)\b|\{'|\['|'\}|'\]|\bnan\b|\b\d{5,}(?:\.\d+)? ?ms\b",
)

# Every element wider than the window, or out of it sideways, that no ancestor of it
# clips or scrolls (the one box meant to scroll may hold something wider than itself).
OVERFLOW = """() => {
    const width = document.documentElement.clientWidth;
    const boxed = (el) => {
        for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
            const o = getComputedStyle(a).overflowX;
            if (o === "auto" || o === "scroll" || o === "hidden") return true;
        }
        return false;
    };
    const wide = [];
    for (const el of document.body.querySelectorAll("*")) {
        const r = el.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        if ((r.right > width + 0.5 || r.left < -0.5) && !boxed(el)) {
            wide.push(el.tagName.toLowerCase() + "." + el.className + " " +
                      Math.round(r.left) + ".." + Math.round(r.right));
        }
    }
    return {scroll: document.documentElement.scrollWidth, width: width,
            inner: window.innerWidth, wide: wide.slice(0, 20)};
}"""

# The page's text, less what an actor wrote (its response, output and own account:
# shown in `.untrusted` boxes and the account's steps) and less script and style.
OWN_TEXT = """() => {
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const out = [];
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
        const parent = node.parentElement;
        if (parent && parent.closest(".untrusted, .step, script, style")) continue;
        out.push(node.textContent);
    }
    return out.join("\\n");
}"""

# The boxes of the chart's native-success label and of every other text in the chart.
CHART_BOXES = """() => {
    const svg = document.querySelector("svg.actions");
    if (!svg) return null;
    const box = (el) => { const r = el.getBoundingClientRect();
        return [r.left, r.top, r.right, r.bottom]; };
    const label = svg.querySelector("text.success-label");
    return {svg: box(svg), label: label && box(label),
            others: Array.from(svg.querySelectorAll("text:not(.success-label)")).map(box)};
}"""


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def reprs(text: str) -> list[str]:
    """Each line of `text` that shows a repr, with the match."""
    return [
        f"{m.group(0)!r} in {line.strip()!r}"
        for line in text.splitlines()
        for m in REPR.finditer(line)
    ]


def read_as_a_page(browser: Any, page_file: Path, shot: str) -> dict[str, Any]:
    """Open `page_file` at 1280x800, keep its screenshot as `shot`, and say what does
    not read like a page: overflow, reprs, a chart label under its legend."""
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
        overflow = page.evaluate(OVERFLOW)
        text = page.evaluate(OWN_TEXT)
        shown = page.evaluate("() => document.body.innerText")
        chart = page.evaluate(CHART_BOXES)
    finally:
        page.close()
    assert overflow["width"] <= VIEWPORT["width"] and text, (overflow, text[:200])
    covered = []
    if chart is not None and chart["label"] is not None:
        covered = [b for b in chart["others"] if _overlap(b, chart["label"])]
        if chart["label"][2] > chart["svg"][2] + 0.5:
            covered.append(chart["svg"])  # the label runs out of the chart
    return {
        "overflows": overflow["scroll"] > overflow["width"],
        "overflow": overflow,
        "reprs": reprs(text),
        "covered": covered,
        "chart": chart,
        "shown": shown,
    }


def assert_reads_like_pages(browser: Any, site_dir: Path, name: str) -> dict[str, dict[str, Any]]:
    """Every page of the site at `site_dir` reads as a page; what each showed, by page
    ("run" or the attempt's id)."""
    pages = [("run", site_dir / "index.html")] + [
        (folder.name, folder / "index.html") for folder in sorted((site_dir / "attempts").iterdir())
    ]
    found = {
        label: read_as_a_page(browser, file, f"viewer-readable-{name}-{label}.png")
        for label, file in pages
    }
    bad = {
        label: {k: v for k, v in seen.items() if k in ("overflow", "reprs", "covered")}
        for label, seen in found.items()
        if seen["overflows"] or seen["overflow"]["wide"] or seen["reprs"] or seen["covered"]
    }
    assert bad == {}, json.dumps(bad, indent=1)
    assert all(
        (ARTIFACTS / f"viewer-readable-{name}-{label}.png").stat().st_size > 5_000
        for label in found
    )
    return found
