"""Where the ATIF export puts the agent's own account around the evaluator's response
step of a policy call: up to the agent's tool call that names the response file (read
from the whole command, before it is clipped), then the response, then what the agent
went on to do (`split_at_answer`)."""

from __future__ import annotations

from mailroom.orchestrator.actors.agent_trace import MAX_ITEM_CHARS, Clipped, Step, tool_call
from mailroom.orchestrator.results.atif_export import split_at_answer


def _tool(command: str) -> Step:
    return tool_call(1, "Bash", command)


def _said(text: str) -> Step:
    return Step(kind="text", line=1, text=Clipped(text))


def test_what_the_agent_did_after_its_answer_comes_after_the_response() -> None:
    read = _tool("cat outbox/obs-4.json")
    tmp = _tool("printf '{}' > inbox/.resp-4.json.tmp")
    moved = _tool("mv inbox/.resp-4.json.tmp inbox/resp-4.json")
    refused = _said("API Error: 403 the episode is over")
    before, after = split_at_answer([read, _said("thinking"), tmp, moved, refused], 4)
    assert before == [read, _said("thinking"), tmp, moved]
    assert after == [refused]


def test_a_response_file_named_past_where_the_command_is_clipped_still_cuts() -> None:
    script = _tool(
        "python3 - <<'EOF'\n" + "x = 1\n" * MAX_ITEM_CHARS + "open('inbox/resp-7.json')\nEOF"
    )
    assert script.call is not None and "resp-7.json" not in script.call.text  # clipped
    waited = _tool("ls outbox/obs-8.json")
    assert split_at_answer([script, waited], 7) == ([script], [waited])


def test_an_account_that_never_names_its_response_file_comes_before_it() -> None:
    steps = [_tool("cat outbox/obs-2.json"), _said("done"), _tool("ls inbox/resp-12.json")]
    assert split_at_answer(steps, 2) == (steps, [])
    assert split_at_answer(steps, 1) == (steps, [])  # resp-12 is not resp-1 or resp-2
    assert split_at_answer([_tool("cat inbox/xresp-3.json")], 3) == (
        [_tool("cat inbox/xresp-3.json")],
        [],
    )
    assert split_at_answer([], 3) == ([], [])


def test_words_that_name_the_response_file_do_not_cut() -> None:
    said = _said("I will write inbox/resp-5.json next")
    assert split_at_answer([said, _tool("cat outbox/obs-5.json")], 5) == (
        [said, _tool("cat outbox/obs-5.json")],
        [],
    )
