"""The site's own style sheet and script (the only script a page runs)."""

from __future__ import annotations

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #111; max-width: 1200px; }
h1 { font-size: 1.4em; word-break: break-all; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
table.identity th { background: #f3f3f3; font-weight: 600; }
table.identity td { overflow-wrap: anywhere; }  /* a long task name breaks, not the page */
/* Wide tables fit the window: their cells wrap where they have spaces, but attempt names. */
table.attempts { font-size: 0.9em; }
table.attempts td:first-child a { white-space: nowrap; }
table.attempts div.instruction { color: #444; font-size: 0.9em; max-width: 26em; }
/* A long error code or a model name an actor's provider gave breaks rather than widen it. */
table.attempts td.error, table.usage-models td:first-child { overflow-wrap: anywhere; }
table.suites .interval { color: #555; font-size: 0.9em; }
tr.hidden { display: none; }
pre.untrusted, pre.prefix { background: #f7f7f7; border: 1px solid #ddd; padding: 0.5em;
  max-height: 24em; overflow: auto; white-space: pre-wrap; word-break: break-all; }
.decision { border-top: 2px solid #888; margin-top: 1.2em; padding-top: 0.4em; }
.images, .videos { display: flex; gap: 1em; flex-wrap: wrap; }
figure { margin: 0; }
.warn { color: #8a4b00; }
.live { color: #225; font-style: italic; }
.missing { color: #777; font-style: italic; }
.verdict { font-weight: 600; }
.success { color: #0a7a0a; font-weight: 600; }
svg.actions { background: #fff; border: 1px solid #ddd; max-width: 100%; height: auto; }
svg.actions text { font-size: 11px; fill: #333; }
svg.actions .grid { stroke: #ddd; }
svg.actions line.success { stroke: #0a7a0a; stroke-width: 2; stroke-dasharray: 4 3; }
svg.actions text.success-label { fill: #0a7a0a; }
.filters label { margin-right: 1em; }
details.account { margin: 0.6em 0; border: 1px dashed #b9a; padding: 0.3em 0.6em; }
details.account > summary { cursor: pointer; color: #6a3d5a; font-style: italic; }
.step { border-left: 3px solid #ddd; margin: 0.5em 0; padding-left: 0.6em; }
.step-tool { border-left-color: #9ab; }
.step-error { border-left-color: #c77; }
.step-head { margin: 0.2em 0; font-weight: 600; }
.step-head .line, .step-result { color: #666; font-weight: normal; }
"""

# Filters the run page's attempts by suite, outcome, blinded and termination.
SCRIPT = """
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var selects = Array.prototype.slice.call(document.querySelectorAll("select.filter"));
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.attempt"));
  var shown = document.getElementById("shown");
  function apply() {
    var count = 0;
    rows.forEach(function (row) {
      var keep = selects.every(function (s) {
        return s.value === "" || row.dataset[s.dataset.filter] === s.value;
      });
      row.classList.toggle("hidden", !keep);
      if (keep) { count += 1; }
    });
    if (shown) { shown.textContent = String(count); }
  }
  selects.forEach(function (s) { s.addEventListener("change", apply); });
  apply();
});
"""
