"""The viewer's HTML frame and its escaping, shared by every page.

Every value is escaped where it is put into the markup (`esc`), whoever wrote it; an
actor's text only ever appears as element text (`untrusted_text.py`), never in an
attribute that a browser acts on, a script or a style. Each page also declares a content
security policy that lets it load only the site's own files and run only the site's own
script, so that a mistake in escaping still could not run anything or reach the network.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

CSP = (
    "default-src 'none'; img-src 'self'; media-src 'self'; style-src 'self'; "
    "script-src 'self'; base-uri 'none'; form-action 'none'"
)
LIVE_REFRESH_S = 5


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def page(title: str, body: str, *, root: str, live: bool) -> str:
    """A whole page; `root` is the relative path to the site's top ("." or "../..")."""
    refresh = f'<meta http-equiv="refresh" content="{LIVE_REFRESH_S}">' if live else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="referrer" content="no-referrer">'
        f"{refresh}<title>{esc(title)}</title>"
        f'<link rel="stylesheet" href="{root}/style.css">'
        f'<script src="{root}/viewer.js" defer></script>'
        f"</head><body>{body}</body></html>\n"
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], css: str = "") -> str:
    """A table of cells that are markup already (each escaped by its caller)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def fact_rows(facts: Iterable[tuple[str, object]]) -> str:
    """A label and its value per row, both escaped (a table's rows, without the table)."""
    return "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
