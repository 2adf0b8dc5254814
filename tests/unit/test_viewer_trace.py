"""An agent CLI's own account of its work (orchestrator/actors/agent_trace.py, and the parsers
it finds registered: agents/claude_code/trace.py, agents/codex_cli/trace.py): both formats
read as untrusted text, bounded, images never shown; the steps placed beside the policy
calls by the mailbox names they name; and the attempt page's folded sections (no
simulator, no browser: tests/browser/test_viewer_browser.py opens such a page in Chromium)."""

from __future__ import annotations

import json
import re
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from mailroom.agents.claude_code import trace as claude_trace
from mailroom.agents.codex_cli import trace as codex_trace
from mailroom.agents.gemini_cli import trace as gemini_trace
from mailroom.benchmarks.libero.specs import LIBERO_ACTION, LIBERO_OBSERVATION
from mailroom.orchestrator.actors import agent_trace as trace_module
from mailroom.orchestrator.actors.agent_trace import (
    MAX_ITEM_CHARS,
    Step,
    assign,
    declared_trace,
    parse_trace,
    trace_parsers,
)
from mailroom.orchestrator.actors.profiles import (
    TRACE_PARSERS_GROUP,
    load_profile,
    shipped_agents,
)
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.viewer.account_section import ACCOUNT_LABEL
from mailroom.orchestrator.viewer.attempt_page import attempt_page
from mailroom.orchestrator.viewer.markup import CSP
from mailroom.orchestrator.viewer.run_shape import RunShape
from mailroom.orchestrator.viewer.site import build_site
from mailroom.orchestrator.viewer.timeline import read_timeline
from recorded_runs import make_run, write_result
from traced_runs import PNG, assistant, bash, claude_episode, jsonl, tool_result, traced_run

LIBERO_SHAPE = RunShape.of(LIBERO_ACTION, LIBERO_OBSERVATION.cameras)


MARKUP = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def test_the_registry_holds_exactly_the_formats_the_shipped_agents_declare() -> None:
    assert dict(trace_parsers()) == {
        "claude_stream_json": claude_trace.PARSER,
        "codex_json": codex_trace.PARSER,
        "gemini_stream_json": gemini_trace.PARSER,
    }
    declared = {
        actor.trace
        for actor in (load_profile(name).profile.actor for name in shipped_agents())
        if actor is not None and actor.trace is not None
    }
    assert declared == set(trace_parsers())


def test_a_format_nobody_registered_is_said_and_not_read() -> None:
    unknown = parse_trace(claude_episode(), "some_future_format")
    assert unknown.format == "some_future_format" and not unknown.readable
    assert unknown.steps == [] and unknown.problems == [
        "the format 'some_future_format' is not one this evaluator reads "
        "(claude_stream_json, codex_json, gemini_stream_json)"
    ]


def test_an_entry_point_that_fails_to_load_or_names_no_parser_is_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    group = TRACE_PARSERS_GROUP
    points = [
        EntryPoint("missing", "mailroom.agents.no_such_agent.trace:PARSER", group),
        EntryPoint("not_callable", "mailroom.orchestrator.actors.agent_trace:MAX_STEPS", group),
        EntryPoint("claude_stream_json", "mailroom.agents.claude_code.trace:PARSER", group),
    ]

    def registered(*, group: str) -> list[EntryPoint]:
        return points if group == TRACE_PARSERS_GROUP else []

    monkeypatch.setattr(trace_module, "entry_points", registered)
    trace_parsers.cache_clear()
    try:
        assert dict(trace_parsers()) == {"claude_stream_json": claude_trace.PARSER}
        assert parse_trace(b"{}\n", "missing").problems == [
            "the format 'missing' is not one this evaluator reads (claude_stream_json)"
        ]
    finally:
        trace_parsers.cache_clear()


def test_a_plug_in_parser_that_raises_loses_only_its_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fragile(record: dict[str, object], line: int, *_: object) -> bool:
        if record.get("boom"):
            raise KeyError("boom")
        return claude_trace.PARSER(record, line, *_)  # type: ignore[arg-type]

    monkeypatch.setattr(trace_module, "trace_parsers", lambda: {"fragile": fragile})
    trace = parse_trace(b'{"boom": 1}\n' + claude_episode(), "fragile")
    assert trace.problems[0] == "the fragile parser failed on it (KeyError): line 1: left out"
    assert [s.kind for s in trace.steps][-1] == "result"


def test_a_claude_stream_json_account_in_order_with_results_and_no_image_data() -> None:
    trace = parse_trace(claude_episode(), "claude_stream_json")
    assert trace.readable and trace.problems == []
    kinds = [s.kind for s in trace.steps]
    assert " ".join(kinds) == "note text tool thinking tool tool text tool tool tool result"
    init, _, listing, _, image, respond, _, observed, failed, closing, result = trace.steps
    assert init.text is not None and "claude-test" in init.text.text
    assert listing.tool == "Bash" and listing.call is not None and listing.call.text == "ls outbox"
    assert listing.output is not None and "obs-1.json" in listing.output.text
    assert listing.marks == () and listing.is_error is False
    assert image.tool == "Read" and image.marks == (1,)
    assert image.output is not None and image.output.text == "[image]"
    assert respond.marks == (1,) and observed.marks == (2,)
    assert failed.is_error is True and failed.output is not None
    assert closing.closes and closing.marks == ()
    assert result.text is not None and result.text.text == "stopped" and result.status == "success"
    assert all(PNG not in (s.output.text if s.output else "") for s in trace.steps)


def test_codex_json_items_are_updated_in_place_and_failures_said() -> None:
    command = {
        "id": "item_1",
        "type": "command_execution",
        "command": "bash -lc 'cat outbox/obs-1.json'",
    }
    data = jsonl(
        {"type": "thread.started", "thread_id": "th"},
        {"type": "turn.started"},
        {
            "type": "item.completed",
            "item": {"id": "item_0", "type": "reasoning", "text": "Look first."},
        },
        {
            "type": "item.started",
            "item": command | {"aggregated_output": "", "exit_code": None, "status": "in_progress"},
        },
        {
            "type": "item.updated",
            "item": command
            | {"aggregated_output": '{"seq', "exit_code": None, "status": "in_progress"},
        },
        {
            "type": "item.completed",
            "item": command
            | {"aggregated_output": '{"sequence": 1}', "exit_code": 0, "status": "completed"},
        },
        {
            "type": "item.completed",
            "item": {
                "id": "item_2",
                "type": "file_change",
                "changes": [{"path": "/e/inbox/resp-1.json", "kind": "add"}],
                "status": "completed",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "item_3",
                "type": "command_execution",
                "command": "python3 -c 'raise SystemExit(3)'",
                "aggregated_output": "boom",
                "exit_code": 3,
                "status": "failed",
            },
        },
        {
            "type": "item.completed",
            "item": {"id": "item_4", "type": "agent_message", "text": "Answered."},
        },
        {
            "type": "item.completed",
            "item": {
                "id": "item_5",
                "type": "mcp_tool_call",
                "server": "s",
                "tool": "t",
                "arguments": {"a": 1},
                "result": None,
                "error": {"message": "denied"},
                "status": "failed",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "item_6",
                "type": "todo_list",
                "items": [{"text": "answer", "completed": True}],
            },
        },
        {
            "type": "item.completed",
            "item": {"id": "item_7", "type": "something_new", "detail": "x"},
        },
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1},
        },
        {"type": "turn.failed", "error": {"message": "stream ended"}},
        {"type": "error", "message": "reconnecting"},
    )
    trace = parse_trace(data, "codex_json")
    assert trace.readable and trace.problems == []
    assert [s.kind for s in trace.steps] == [
        "thinking", "tool", "tool", "tool", "text", "tool", "note", "tool", "error", "error",
    ]  # fmt: skip
    reasoning, cat, change, failed, message, mcp, todo, unknown, turn, error = trace.steps
    assert reasoning.text is not None and reasoning.text.text == "Look first."
    assert cat.line == 4  # where the item started; its last state
    assert cat.output is not None and cat.output.text == '{"sequence": 1}'
    assert cat.exit_code == 0 and cat.is_error is False and cat.status == "completed"
    assert cat.marks == (1,)
    assert change.call is not None and change.call.text == "add /e/inbox/resp-1.json"
    assert change.marks == (1,)
    assert failed.exit_code == 3 and failed.is_error is True
    assert message.text is not None and message.text.text == "Answered."
    assert mcp.tool == "s.t" and mcp.is_error and mcp.output and mcp.output.text == "denied"
    assert todo.text is not None and todo.text.text == "[x] answer"
    assert unknown.tool == "something_new"
    assert turn.text is not None and "stream ended" in turn.text.text
    assert error.text is not None and "reconnecting" in error.text.text


def test_malformed_hostile_and_foreign_lines_are_left_out_and_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(trace_module, "MAX_LINE_BYTES", 10_000)
    surrogate = {"type": "text", "text": "\ud800 ok"}
    orphan_result = {"type": "tool_result", "tool_use_id": "nobody", "content": MARKUP}
    data = b"".join(
        [
            b"{torn\n",
            b"[1, 2]\n",
            b"[" * 4_000 + b"]" * 4_000 + b"\n",  # too deep to read
            b'{"type": "result", "result": "' + b"x" * 10_000 + b'"}\n',  # too long
            b"\xff\xfe not text\n",
            jsonl({"type": "assistant", "message": {"content": [surrogate]}}),
            jsonl({"type": "mystery"}),
            jsonl({"type": "assistant", "message": "not an object"}),
            jsonl({"type": "user", "message": {"content": [orphan_result]}}),
            b"[mailroom: truncated here; 999 more bytes]\n",  # the actor's, mid-stream
            b'{"type": "assistant", "mess',  # cut here by the orchestrator, whose marker
            b"\n[mailroom: truncated here; 12345 more bytes]\n",  # is the last line
        ]
    )
    trace = parse_trace(data, "claude_stream_json")
    assert trace.readable
    assert trace.problems == [
        "not a JSON object: line 1, 2, 3, 5, 10, ... (6 in all): left out",
        "longer than 10000 bytes: line 4: left out",
        "not an event of claude_stream_json this evaluator reads: line 7: left out",
    ]
    assert (
        "incomplete"
        in parse_trace(b'{"type": "assistant", "mess', "claude_stream_json").problems[0]
    )
    text, orphan, cut = trace.steps
    assert text.text is not None and text.text.text == "? ok"  # a lone surrogate replaced
    assert text.text.text.encode("utf-8")
    assert orphan.kind == "tool" and orphan.tool == "(a call not in the trace)"
    assert orphan.output is not None and orphan.output.text == MARKUP  # verbatim: pages escape
    assert cut.kind == "note" and cut.text is not None and "12345 bytes more" in cut.text.text
    # Nothing of the format at all: not readable, and why.
    foreign = parse_trace(jsonl({"type": "item.completed", "item": {}}), "claude_stream_json")
    assert not foreign.readable and foreign.steps == []
    unknown = parse_trace(claude_episode(), "some_future_format")
    assert not unknown.readable and "is not one this evaluator reads" in unknown.problems[0]


def test_an_oversized_item_is_cut_and_says_so() -> None:
    huge = "echo " + "y" * 10_000 + " > inbox/resp-7.json"
    data = jsonl(assistant(bash("big", huge)), tool_result("big", "z" * (MAX_ITEM_CHARS + 1)))
    (step,) = parse_trace(data, "claude_stream_json").steps
    assert step.call is not None and step.call.cut
    assert len(step.call.text) == MAX_ITEM_CHARS and step.call.omitted == len(huge) - MAX_ITEM_CHARS
    assert step.marks == (7,)  # read from the whole command, not only what is shown
    assert step.output is not None and step.output.omitted == 1


def test_many_steps_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_module, "MAX_STEPS", 3)
    data = jsonl(*(assistant({"type": "text", "text": str(i)}) for i in range(10)))
    trace = parse_trace(data, "claude_stream_json")
    assert len(trace.steps) == 3
    assert trace.problems == [
        "the account goes on after its first 3 steps (line 4): the rest is not shown"
    ]
    monkeypatch.setattr(trace_module, "MAX_LINES", 5)
    trace = parse_trace(b"{x\n" * 100 + data, "claude_stream_json")
    assert trace.steps == [] and trace.problems == [
        "not a JSON object: line 1, 2, 3, 4, 5: left out",
        "only the first 5 lines were read: the rest is not shown",
    ]


def _tool(line: int, *marks: int, closes: bool = False) -> Step:
    return Step("tool", line, marks=marks, closes=closes)


def _lines(steps: list[Step]) -> list[int]:
    return [s.line for s in steps]


def test_steps_go_to_the_policy_call_whose_mailbox_files_they_name() -> None:
    steps = [
        _tool(1),  # before the first observation
        Step("text", 2),  # leads up to the call that names obs-1: goes with it
        _tool(3, 1),
        _tool(4),
        _tool(5, 1, 2),  # names both: the later one
        Step("note", 6),
        _tool(7, 1),  # a look back: stays with 2
        _tool(8, 4),  # 3 was never shown: the latest shown before it
        Step("text", 9),
        Step("thinking", 10),
        _tool(11, 6),  # after the last policy call shown
        _tool(12, 5),  # never backwards
        _tool(13, closes=True),
        Step("result", 14),
    ]
    placed = assign(steps, [1, 2, 4, 5])
    assert _lines(placed.before) == [1]
    assert {n: _lines(s) for n, s in placed.decisions.items()} == {
        1: [2, 3, 4],
        2: [5, 6, 7],
        4: [8],
    }
    assert _lines(placed.after) == [9, 10, 11, 12, 13, 14]


def test_closed_json_starts_after_the_episode_and_the_rest_stays_in_the_last_group() -> None:
    steps = [_tool(1, 1), _tool(2, 2), Step("text", 3), _tool(4), Step("text", 5)]
    placed = assign(steps, [1, 2])
    assert _lines(placed.decisions[2]) == [2, 3, 4, 5] and placed.after == []
    closing = assign([_tool(1, 1), _tool(2, closes=True), Step("text", 3)], [1, 2])
    assert _lines(closing.after) == [2, 3] and 2 not in closing.decisions
    nothing_shown = assign([_tool(1, 1), _tool(2, closes=True)], [])
    assert _lines(nothing_shown.before) == [1, 2] and nothing_shown.after == []


def test_a_whole_claude_account_placed() -> None:
    trace = parse_trace(claude_episode(), "claude_stream_json")
    placed = assign(trace.steps, [1, 2])
    assert [s.kind for s in placed.before] == ["note", "text", "tool"]
    assert [s.kind for s in placed.decisions[1]] == ["thinking", "tool", "tool"]
    assert [s.kind for s in placed.decisions[2]] == ["text", "tool", "tool"]
    assert [s.kind for s in placed.after] == ["tool", "result"]


# The attempt page and the run page.


def attempt_html(root: Path, directory: Path, out: Path) -> str:
    build_site(root, out)
    return (out / "attempts" / directory.name / "index.html").read_text()


def test_each_policy_call_shows_its_steps_folded_and_escaped(tmp_path: Path) -> None:
    root, directory = traced_run(tmp_path, "claude_stream_json", claude_episode(MARKUP))
    page = attempt_html(root, directory, tmp_path / "site")
    assert declared_trace(RunDirectory(root).read_manifest()) == "claude_stream_json"
    assert page.count(f"<summary>{ACCOUNT_LABEL.replace(chr(39), '&#x27;')}</summary>") == 4
    sections = re.findall(r'<section class="decision".*?</section>', page, re.S)
    assert len(sections) == 2 and all('details class="account"' in s for s in sections)
    assert "cat outbox/obs-2.json" in sections[1] and "&lt;script&gt;alert(1)" in sections[1]
    assert "Before the first observation" in page and "After the episode" in page
    assert "<script>alert" not in page and 'onerror="alert' not in page
    assert re.findall(r"<script[^>]*>", page) == ['<script src="../../viewer.js" defer>']
    assert page.count(f'content="{CSP}"') == 1
    timeline = page.split("<h2>Timeline</h2>", 1)[1].split("<h2>Actor output", 1)[0]
    assert "[image]" in timeline and PNG not in timeline  # the raw output stays as it was
    assert "account-note" not in (tmp_path / "site" / "index.html").read_text()


def test_an_unreadable_or_unknown_account_is_said_and_the_raw_output_stays(
    tmp_path: Path,
) -> None:
    root, directory = traced_run(
        tmp_path / "a", "codex_json", b"plain text output " + MARKUP.encode()
    )
    page = attempt_html(root, directory, tmp_path / "a" / "site")
    assert "could not be read" in page and "<details" not in page
    assert "<h3>actor-stdout.log</h3>" in page and "&lt;script&gt;alert(1)" in page
    index = (tmp_path / "a" / "site" / "index.html").read_text()
    assert "could not be read for 1 of 1 attempts" in index
    (record,) = RunDirectory(root).attempts()  # still running, nothing written yet
    empty = parse_trace(b"", "codex_json")
    live = attempt_page(
        read_timeline(record, LIBERO_SHAPE), live=True, trace_format="codex_json", trace=empty
    )
    assert "no step of it read yet" in live and "could not be read" not in live
    root, directory = traced_run(tmp_path / "b", "future_json", claude_episode())
    page = attempt_html(root, directory, tmp_path / "b" / "site")
    assert (
        "&#x27;future_json&#x27; is not one this evaluator reads" in page and "<details" not in page
    )
    index = (tmp_path / "b" / "site" / "index.html").read_text()
    assert "which this viewer does not read" in index


def test_a_profile_without_an_account_changes_nothing(tmp_path: Path) -> None:
    run, cases = make_run(tmp_path, proprio=False, run_id="run-plain")
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    directory = run.episode_dir(cases[0].attempt_id(1))
    (directory / "actor-stdout.log").write_bytes(claude_episode())
    page = attempt_html(run.root, directory, tmp_path / "site")
    assert "own account" not in page and "<details" not in page
    # Nor for a run whose actors someone else started: their output was never captured.
    manifest = run.read_manifest()
    declared = {"actor": {"command": ["agent"], "trace": "claude_stream_json"}}
    manifest["profile"]["declaration"] |= declared
    assert manifest["transport"]["actor"] == "external"
    assert declared_trace(manifest) is None


@pytest.mark.parametrize(
    ("fmt", "name"),
    [("claude_stream_json", "claude_code_trace.jsonl"), ("codex_json", "codex_cli_trace.jsonl")],
)
def test_real_cli_accounts_are_read_and_placed_per_decision(fmt: str, name: str) -> None:
    """Accounts the real CLIs wrote in `test_agent_cli_sim.py` (3 acts, then a stop):
    each wait names "obs-<n>.json or closed.json", and is about observation n."""
    data = (Path(__file__).parents[1] / "support" / "data" / name).read_bytes()
    read = parse_trace(data, fmt)
    assert read.problems == []
    placed = assign(read.steps, [1, 2, 3, 4])
    assert sorted(placed.decisions) == [1, 2, 3, 4]
    for sequence in (1, 2, 3, 4):
        calls = [s for s in placed.decisions[sequence] if s.kind == "tool"]
        assert any(f"obs-{sequence}.json" in (s.call.text if s.call else "") for s in calls)
        assert any(f"resp-{sequence}.json" in (s.call.text if s.call else "") for s in calls)
    assert any("closed.json" in (s.call.text if s.call else "") for s in placed.after)


def gemini_episode() -> bytes:
    """A Gemini CLI stream-json account: an answer in pieces, two shell calls (one
    failing), a warning and the final result."""

    def line(**fields: Any) -> str:
        return json.dumps({"timestamp": "2026-12-06T08:00:00Z", **fields})

    shell = "run_shell_command"
    return (
        "\n".join(
            [
                line(type="init", session_id="s", model="gemini-x"),
                line(type="message", role="user", content="the instructions"),
                line(type="message", role="assistant", content="I read ", delta=True),
                line(type="message", role="assistant", content="obs-1.json first.", delta=True),
                line(type="tool_use", tool_name=shell, tool_id="a", parameters={
                    "command": "cat outbox/obs-1.json", "description": "look"}),
                line(type="tool_result", tool_id="a", status="success", output="@@ obs 1"),
                line(type="tool_use", tool_name=shell, tool_id="b", parameters={
                    "command": "mv x inbox/resp-1.json"}),
                line(type="tool_result", tool_id="b", status="error",
                     error={"type": "shell", "message": "no such file"}),
                line(type="error", severity="warning", message="Loop detected"),
                line(type="message", role="assistant", content="Done."),
                line(type="result", status="success", stats={"total_tokens": 9}),
            ]
        )
        + "\n"
    ).encode()  # fmt: skip


def test_a_gemini_stream_json_account_joins_answer_pieces_and_pairs_results() -> None:
    trace = parse_trace(gemini_episode(), "gemini_stream_json")
    assert trace.readable and trace.problems == [] and trace.events == 11
    kinds = [s.kind for s in trace.steps]
    assert kinds == ["note", "input", "text", "tool", "tool", "error", "text", "result"]
    note, _, answer, read, write, warning, done, result = trace.steps
    assert note.text is not None and "gemini-x" in note.text.text
    assert answer.text is not None and answer.text.text == "I read obs-1.json first."
    assert read.tool == "run_shell_command" and read.marks == (1,)
    assert read.output is not None and read.output.text == "@@ obs 1"
    assert read.is_error is False and read.status == "success"
    assert write.marks == (1,) and write.is_error is True
    assert write.output is not None and write.output.text == "shell: no such file"
    assert warning.text is not None and warning.text.text == "warning: Loop detected"
    assert done.text is not None and done.text.text == "Done."
    assert result.status == "success" and result.is_error is False


def test_gemini_answer_pieces_past_the_limit_are_counted_not_kept() -> None:
    piece = json.dumps(
        {"type": "message", "role": "assistant", "content": "x" * 3000, "delta": True}
    )
    trace = parse_trace(f"{piece}\n{piece}\n{piece}\n".encode(), "gemini_stream_json")
    (answer,) = trace.steps
    assert answer.text is not None and len(answer.text.text) == MAX_ITEM_CHARS
    assert answer.text.omitted == 9000 - MAX_ITEM_CHARS


def test_a_deeply_nested_input_is_shown_without_indentation_growing_with_depth() -> None:
    # Indented JSON grows with the square of the depth: 300 levels would be a hundred
    # times the line an actor wrote. Past what is shown, the compact form is used.
    deep: object = "x" * 5000
    for _ in range(300):
        deep = [deep]
    compact = json.dumps(deep)
    assert trace_module.as_text(deep) == compact
    assert trace_module.as_text({"command": ["ls"]}) == json.dumps({"command": ["ls"]}, indent=1)
