"""An ATIF export imported by an agent-trajectory tool: inspect_scout's ATIF source in its
own venv (`client_venvs.py`, requirements/inspect-scout-client.txt), run on the export
folder by `clients/scout_importer.py`; the transcripts it made come back as JSON and are
held to the trajectories they were made from."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from client_venvs import run_client

CLIENT = "inspect_scout"


def import_with_inspect_scout(export_dir: Path, scratch: Path) -> dict[str, Any]:
    """{"transcripts": [...], "warnings": [...]}: what inspect_scout made of every
    trajectory below `export_dir`, and every warning it logged."""
    scratch.mkdir(parents=True, exist_ok=True)
    out = scratch / "transcripts.json"
    run_client(CLIENT, "scout_importer.py", scratch, str(export_dir), str(out))
    document: dict[str, Any] = json.loads(out.read_text("utf-8"))
    return document


def assert_transcript_is_its_trajectory(transcript: dict[str, Any], folder: Path) -> None:
    """One transcript against the trajectory in `folder` (its images beside it): one
    message per step in order (the account's tool outputs as tool messages after their
    calls), every image loaded, one model event per metered response with its tokens,
    the agent, the model, the date and the totals."""
    trajectory = json.loads((folder / "trajectory.json").read_text("utf-8"))
    steps = trajectory["steps"]
    assert transcript["source_type"] == "atif"
    assert transcript["transcript_id"] == trajectory["trajectory_id"]
    assert transcript["source_id"] == trajectory["session_id"]
    assert transcript["agent"] == trajectory["agent"]["name"]
    assert transcript["model"] == trajectory["agent"].get("model_name")
    assert steps[0].get("timestamp"), "the launch message has no time (no actor_started event)"
    started = datetime.fromisoformat(steps[0]["timestamp"].replace("Z", "+00:00"))
    assert transcript["date"] is not None
    assert datetime.fromisoformat(transcript["date"]) == started
    final = trajectory["final_metrics"]
    total = final.get("total_prompt_tokens", 0) + final.get("total_completion_tokens", 0)
    assert transcript["total_tokens"] == (total or None)

    expected: list[tuple[str, int]] = []  # (role, step id) per message
    for step in steps:
        role = {"system": "system", "user": "user", "agent": "assistant"}[step["source"]]
        expected.append((role, step["step_id"]))
        for _ in (step.get("observation") or {}).get("results", []):
            expected.append(("tool", step["step_id"]))
    messages = transcript["messages"]
    assert [m["role"] for m in messages] == [role for role, _ in expected]
    assert transcript["message_count"] == len(messages)
    by_id = {s["step_id"]: s for s in steps}
    for message, (role, step_id) in zip(messages, expected, strict=True):
        step = by_id[step_id]
        if role == "tool":
            [result] = step["observation"]["results"]
            [call] = step["tool_calls"]
            assert message["tool_call_id"] == call["tool_call_id"] == result["source_call_id"]
            assert message["function"] == call["function_name"]
            assert [p["text"] for p in message["content"]] == [result["content"]]
            continue
        if isinstance(step["message"], list):
            parts = step["message"]
            assert [p["type"] for p in message["content"]] == [p["type"] for p in parts]
            for got, part in zip(message["content"], parts, strict=True):
                if part["type"] == "image":  # read from beside the trajectory, whole
                    image = folder / part["source"]["path"]
                    assert got["uri"].startswith("data:image/png;base64,")
                    prefix = len("data:image/png;base64,")
                    assert got["length"] - prefix == 4 * -(-image.stat().st_size // 3)
                else:
                    assert got["text"] == part["text"]
        else:
            texts = [p["text"] for p in message["content"] if p["type"] == "text"]
            assert "".join(texts) == step["message"]
        if role == "assistant":
            assert message["model"] == step.get("model_name")
            calls = [(c["id"], c["function"]) for c in message["tool_calls"]]
            assert calls == [
                (c["tool_call_id"], c["function_name"]) for c in step.get("tool_calls", [])
            ]

    metered = [s for s in steps if "metrics" in s]
    models = [e for e in transcript["events"] if e["event"] == "model"]
    assert len(models) == len(metered)
    for event, step in zip(models, metered, strict=True):
        metrics = step["metrics"]
        assert event["model"] == step["model_name"]
        assert event["output_tokens"] == metrics["completion_tokens"]
        assert (
            event["input_tokens"] + (metrics.get("cached_tokens") or 0) == metrics["prompt_tokens"]
        )
