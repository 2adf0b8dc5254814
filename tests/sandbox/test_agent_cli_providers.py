"""The stand-in model providers for agent CLIs: the scripted mailbox driver's logic, and
the server-sent event streams each stand-in speaks, checked with a plain HTTP client."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mailroom.orchestrator.actors.instructions import render_instructions
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn
from mailroom.orchestrator.perf.provider_standin.driver import (
    FINAL_TEXT,
    GAVE_UP_TEXT,
    NO_ENDPOINT_TEXT,
    Conversation,
    DriverSettings,
    FinalText,
    ShellCommand,
    endpoint_of,
    next_move,
)
from mailroom.orchestrator.perf.provider_standin.openai_standin import OpenAIStandIn

FAST = DriverSettings(act_decisions=2, wait_s=0.3, poll_s=0.05, max_waits=3)


def observation(sequence: int, *, max_chunk: int = 3, feedback: Any = None) -> dict[str, Any]:
    return {
        "schema": "mailroom.observation/v1",
        "request_id": f"{sequence:032x}",
        "sequence": sequence,
        "response_file": f"inbox/resp-{sequence}.json",
        "action_spec": {"max_chunk": max_chunk, "replan_interval": max_chunk},
        "feedback": feedback,
    }


@pytest.fixture
def endpoint(tmp_path: Path) -> Path:
    root = tmp_path / "0123456789abcdef0123456789abcdef"
    for name in ("outbox", "inbox", "scratch"):
        (root / name).mkdir(parents=True)
    return root


def publish(endpoint: Path, name: str, document: dict[str, Any]) -> None:
    (endpoint / "outbox" / name).write_text(json.dumps(document, indent=1) + "\n")


def run(move: ShellCommand) -> str:
    """Run a move as the agent's shell tool would, and return what it printed."""
    out = subprocess.run(
        ["/bin/sh", "-c", move.command], capture_output=True, text=True, timeout=10, check=True
    )
    return out.stdout


def play(prompt: str, results: list[str]) -> ShellCommand | FinalText:
    return next_move(Conversation(prompt, tuple(results)), FAST)


# -- the driver ----------------------------------------------------------------------


def test_the_endpoint_is_read_from_the_rendered_instructions(endpoint: Path) -> None:
    prompt = render_instructions(str(endpoint), host="h")
    assert endpoint_of(prompt) == str(endpoint)
    assert endpoint_of("no endpoint here") is None
    assert next_move(Conversation("nothing")) == FinalText(NO_ENDPOINT_TEXT)


def test_a_whole_episode_through_real_files(endpoint: Path) -> None:
    prompt = render_instructions(str(endpoint), host="h")
    results: list[str] = []

    first = play(prompt, results)
    assert isinstance(first, ShellCommand) and first.purpose == "wait"
    assert str(endpoint / "outbox" / "obs-1.json") in first.command
    results.append(run(first))  # nothing published yet: it waits, bounded, then says so
    assert results[-1].startswith("@@ waiting 1")
    again = play(prompt, results)
    assert again == first

    responses = []
    for sequence in (1, 2, 3):
        publish(endpoint, f"obs-{sequence}.json", observation(sequence))
        wait = play(prompt, results)
        assert isinstance(wait, ShellCommand) and wait.purpose == "wait"
        results.append(run(wait))
        assert results[-1].startswith(f"@@ obs {sequence}")
        respond = play(prompt, results)
        assert isinstance(respond, ShellCommand) and respond.purpose == "respond"
        assert f"inbox/.resp-{sequence}.json.tmp" in respond.command
        results.append(run(respond))
        assert results[-1].strip() == f"@@ wrote {sequence}"
        final = endpoint / "inbox" / f"resp-{sequence}.json"
        assert not (endpoint / "inbox" / f".resp-{sequence}.json.tmp").exists()
        responses.append(json.loads(final.read_bytes()))
        final.unlink()  # the evaluator takes it

    assert [r["decision"] for r in responses] == ["act", "act", "stop"]
    assert responses[0] == {
        "schema": "mailroom.response/v1",
        "request_id": f"{1:032x}",
        "decision": "act",
        "actions": [[0.0, 0.0, 0.1, 0.0, 0.0, 0.0, -1.0]] * 3,
    }
    assert "actions" not in responses[2]

    publish(endpoint, "closed.json", {"schema": "mailroom.closed/v1", "last_sequence": 3})
    wait = play(prompt, results)
    assert isinstance(wait, ShellCommand)
    results.append(run(wait))
    assert results[-1].startswith("@@ closed")
    assert play(prompt, results) == FinalText(FINAL_TEXT)
    assert os.listdir(endpoint / "inbox") == []


def test_the_chunk_follows_max_chunk_and_the_cap() -> None:
    prompt = "Your endpoint directory: /e\n"
    seen = "@@ obs 1\n" + json.dumps(observation(1, max_chunk=7))
    move = play(prompt, [seen])
    assert isinstance(move, ShellCommand)
    assert move.command.count("[0.0, 0.0, 0.1, 0.0, 0.0, 0.0, -1.0]") == 7
    capped = next_move(Conversation(prompt, (seen,)), DriverSettings(chunk_cap=2))
    assert isinstance(capped, ShellCommand)
    assert capped.command.count("[0.0, 0.0, 0.1, 0.0, 0.0, 0.0, -1.0]") == 2


def test_a_rejected_response_is_followed_by_an_answer_to_the_next_observation() -> None:
    prompt = "Your endpoint directory: /e\n"
    feedback = {"rejected_sequence": 1, "issues": [{"code": "x", "message": "y"}]}
    results = [
        "@@ obs 1\n" + json.dumps(observation(1)),
        "@@ wrote 1\n",
        "Process exited with code 0\nOutput:\n@@ obs 2\n"
        + json.dumps(observation(2, feedback=feedback)),
    ]
    move = play(prompt, results)
    assert isinstance(move, ShellCommand) and move.purpose == "respond"
    assert f"{2:032x}" in move.command and "resp-2.json" in move.command


def test_a_tool_result_framed_by_the_agent_is_still_recognised() -> None:
    prompt = "<system-reminder>x</system-reminder>\nYour endpoint directory: /e/p\nmore"
    framed = "Chunk ID: 1\nWall time: 0.2 seconds\nOutput:\n@@ obs 1\n" + json.dumps(
        observation(1), indent=1
    )
    move = play(prompt, [framed])
    assert isinstance(move, ShellCommand) and "/e/p/inbox/resp-1.json" in move.command


def test_waiting_gives_up_after_max_waits_and_news_resets_the_count() -> None:
    prompt = "Your endpoint directory: /e\n"
    assert play(prompt, ["@@ waiting 1\n"] * 2) != FinalText(GAVE_UP_TEXT)
    assert play(prompt, ["@@ waiting 1\n"] * 3) == FinalText(GAVE_UP_TEXT)
    obs = "@@ obs 1\n" + json.dumps(observation(1))
    results = ["@@ waiting 1\n"] * 2 + [obs, "@@ wrote 1\n"] + ["@@ waiting 2\n"] * 2
    move = play(prompt, results)
    assert isinstance(move, ShellCommand) and "obs-2.json" in move.command


def test_the_driver_is_stateless() -> None:
    prompt = "Your endpoint directory: /e\n"
    conversation = Conversation(prompt, ("@@ obs 1\n" + json.dumps(observation(1)),))
    assert next_move(conversation, FAST) == next_move(conversation, FAST)
    other = Conversation("Your endpoint directory: /f\n", conversation.tool_results)
    move = next_move(other, FAST)
    assert isinstance(move, ShellCommand) and "/f/inbox/" in move.command


# -- the stand-in servers ------------------------------------------------------------


def post(port: int, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        payload = json.dumps(body).encode()
        connection.request("POST", path, payload, {"Content-Type": "application/json"})
        response = connection.getresponse()
        headers = {k.lower(): v for k, v in response.getheaders()}
        return response.status, headers, response.read()
    finally:
        connection.close()


def sse_events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Parse a server-sent event stream strictly: every event has a name and JSON data."""
    text = data.decode()
    assert text.endswith("\n\n")
    events = []
    for block in text.split("\n\n")[:-1]:
        lines = block.split("\n")
        assert len(lines) == 2, block
        assert lines[0].startswith("event: ") and lines[1].startswith("data: ")
        name = lines[0].removeprefix("event: ")
        payload = json.loads(lines[1].removeprefix("data: "))
        assert payload["type"] == name
        events.append((name, payload))
    return events


@pytest.fixture
def anthropic() -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn(FAST) as server:
        assert isinstance(server, AnthropicStandIn)
        yield server


@pytest.fixture
def openai() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn(FAST) as server:
        assert isinstance(server, OpenAIStandIn)
        yield server


BASH_TOOL = {
    "name": "Bash",
    "description": "run a command",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
        "required": ["command"],
    },
}


def messages_request(*tool_results: str, stream: bool = True) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Your endpoint directory: /e\n"}]}
    ]
    for index, result in enumerate(tool_results):
        call = f"toolu_{index}"
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": "Bash", "input": {}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": result}],
            }
        )
    return {
        "model": "stand-in-model",
        "max_tokens": 1000,
        "stream": stream,
        "tools": [BASH_TOOL],
        "messages": messages,
    }


def test_anthropic_streams_a_tool_use_as_the_api_does(anthropic: AnthropicStandIn) -> None:
    status, headers, data = post(anthropic.port, "/v1/messages?beta=true", messages_request())
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(data)
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names[2] == "content_block_start" and names[-3] == "content_block_stop"
    assert set(names[3:-3]) == {"content_block_delta"}
    start = events[0][1]["message"]
    assert start["role"] == "assistant" and start["content"] == []
    assert start["model"] == "stand-in-model" and start["stop_reason"] is None
    block = events[2][1]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "Bash" and block["input"] == {}
    deltas = [p["delta"] for n, p in events if n == "content_block_delta"]
    assert all(d["type"] == "input_json_delta" for d in deltas)
    arguments = json.loads("".join(d["partial_json"] for d in deltas))
    assert "/e/outbox/obs-1.json" in arguments["command"]
    assert set(arguments) == {"command", "description"}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert events[-2][1]["usage"]["output_tokens"] >= 1
    record = anthropic.requests()[-1]
    assert (record.method, record.path, record.status) == ("POST", "/v1/messages?beta=true", 200)
    assert record.summary.startswith("Bash wait")


def test_anthropic_ends_the_turn_with_text(anthropic: AnthropicStandIn) -> None:
    closed = '@@ closed\n{"schema": "mailroom.closed/v1", "last_sequence": 1}'
    _, _, data = post(anthropic.port, "/v1/messages", messages_request(closed))
    events = sse_events(data)
    assert events[2][1]["content_block"] == {"type": "text", "text": ""}
    texts = [p["delta"]["text"] for n, p in events if n == "content_block_delta"]
    assert "".join(texts) == FINAL_TEXT
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"

    status, _, body = post(anthropic.port, "/v1/messages", messages_request(closed, stream=False))
    message = json.loads(body)
    assert status == 200 and message["type"] == "message"
    assert message["content"] == [{"type": "text", "text": FINAL_TEXT}]
    assert message["stop_reason"] == "end_turn"


def test_anthropic_answers_the_other_requests(anthropic: AnthropicStandIn) -> None:
    side = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "title?"}]}
    _, _, data = post(anthropic.port, "/v1/messages", {**side, "stream": True})
    assert [p["delta"]["text"] for n, p in sse_events(data) if n == "content_block_delta"] == ["OK"]
    status, _, body = post(anthropic.port, "/v1/messages/count_tokens", side)
    assert status == 200 and json.loads(body)["input_tokens"] >= 1
    connection = http.client.HTTPConnection("127.0.0.1", anthropic.port, timeout=5)
    connection.request("HEAD", "/")
    assert connection.getresponse().status == 200
    connection.close()
    status, _, body = post(anthropic.port, "/v1/other", {})
    assert status == 404 and json.loads(body)["type"] == "error"
    assert [r.method for r in anthropic.requests()] == ["POST", "POST", "HEAD", "POST"]


EXEC_COMMAND_TOOL = {
    "type": "function",
    "name": "exec_command",
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}, "yield_time_ms": {"type": "number"}},
    },
}
CODE_MODE_TOOLS = {
    "type": "additional_tools",
    "role": "developer",
    "tools": [
        {
            "type": "namespace",
            "name": "functions",
            "tools": [
                {
                    "type": "custom",
                    "name": "exec",
                    "description": "declare const tools: { exec_command(args: {cmd: string}) }",
                }
            ],
        }
    ],
}


def responses_request(*outputs: str, code_mode: bool = False) -> dict[str, Any]:
    items: list[dict[str, Any]] = [CODE_MODE_TOOLS] if code_mode else []
    items.append(
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Your endpoint directory: /e\n"}],
        }
    )
    kind = "custom_tool_call_output" if code_mode else "function_call_output"
    for index, output in enumerate(outputs):
        items.append({"type": kind, "call_id": f"call_{index}", "output": output})
    body: dict[str, Any] = {"model": "stand-in-model", "stream": True, "input": items}
    if not code_mode:
        body["tools"] = [EXEC_COMMAND_TOOL]
    return body


def check_response_stream(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    names = [name for name, _ in events]
    assert names[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert names[-2:] == ["response.output_item.done", "response.completed"]
    assert [p["sequence_number"] for _, p in events] == list(range(len(events)))
    assert events[0][1]["response"]["status"] == "in_progress"
    completed = events[-1][1]["response"]
    assert completed["status"] == "completed"
    assert completed["output"] == [events[-2][1]["item"]]
    usage = completed["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0
    item: dict[str, Any] = events[-2][1]["item"]
    return item


def test_openai_streams_a_function_call_as_the_api_does(openai: OpenAIStandIn) -> None:
    status, headers, data = post(openai.port, "/v1/responses", responses_request())
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(data)
    item = check_response_stream(events)
    assert item["type"] == "function_call" and item["name"] == "exec_command"
    added = events[2][1]["item"]
    assert added["arguments"] == "" and added["call_id"] == item["call_id"]
    deltas = [p["delta"] for n, p in events if n == "response.function_call_arguments.delta"]
    assert "".join(deltas) == item["arguments"]
    done = [p for n, p in events if n == "response.function_call_arguments.done"]
    assert done[0]["arguments"] == item["arguments"]
    arguments = json.loads(item["arguments"])
    assert "/e/outbox/obs-1.json" in arguments["cmd"] and arguments["yield_time_ms"] == 30000
    assert openai.requests()[-1].summary.startswith("exec_command wait")


def test_openai_calls_code_mode_exec_with_javascript(openai: OpenAIStandIn) -> None:
    obs = "@@ obs 1\n" + json.dumps(observation(1))
    _, _, data = post(openai.port, "/v1/responses", responses_request(obs, code_mode=True))
    events = sse_events(data)
    item = check_response_stream(events)
    assert item["type"] == "custom_tool_call" and item["name"] == "exec"
    deltas = [p["delta"] for n, p in events if n == "response.custom_tool_call_input.delta"]
    assert "".join(deltas) == item["input"]
    assert "await tools.exec_command(" in item["input"] and "text(result.output)" in item["input"]
    assert "inbox/resp-1.json" in item["input"]


def test_openai_ends_with_a_message_and_answers_the_rest(openai: OpenAIStandIn) -> None:
    closed = '@@ closed\n{"schema": "mailroom.closed/v1", "last_sequence": 1}'
    _, _, data = post(openai.port, "/v1/responses", responses_request(closed))
    events = sse_events(data)
    item = check_response_stream(events)
    assert item["type"] == "message" and item["role"] == "assistant"
    assert item["content"][0]["text"] == FINAL_TEXT
    texts = [p["delta"] for n, p in events if n == "response.output_text.delta"]
    assert "".join(texts) == FINAL_TEXT
    status, _, body = post(openai.port, "/v1/responses", {**responses_request(), "stream": False})
    assert status == 200 and json.loads(body)["output"][0]["type"] == "function_call"
    status, _, body = post(openai.port, "/v1/chat/completions", {})
    assert status == 404 and "error" in json.loads(body)
    assert [r.status for r in openai.requests()] == [200, 200, 404]
