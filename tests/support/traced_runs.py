"""An agent CLI's own account of its work, as Claude Code writes it on its stdout
(`claude -p --output-format stream-json --verbose`), and a run whose spawned actor's
output is such an account, its profile declaring the trace format (no simulator)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from mailroom.orchestrator.campaign.manifest import declaration_sha256
from recorded_runs import make_run, write_result

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()


def jsonl(*records: object) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


# Claude Code, `claude -p --output-format stream-json --verbose`.


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant", "message": {"role": "assistant", "content": list(blocks)}}


def bash(call_id: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}


def tool_result(call_id: str, content: object, is_error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    return {
        "type": "user",
        "message": {"role": "user", "content": [block | {"is_error": is_error}]},
    }


def claude_episode(result_text: str = "done") -> bytes:
    """Two policy calls and the end, as Claude Code reports them."""
    return jsonl(
        {"type": "system", "subtype": "init", "model": "claude-test", "tools": ["Bash"]},
        assistant({"type": "text", "text": "I will wait for the first observation."}),
        assistant(bash("t1", "ls outbox")),
        tool_result("t1", "obs-1.json\nobs-1-agentview.png"),
        assistant({"type": "thinking", "thinking": "The bowl is left.", "signature": "x"}),
        assistant(
            {
                "type": "tool_use",
                "id": "t2",
                "name": "Read",
                "input": {"file_path": "/e/outbox/obs-1-agentview.png"},
            }
        ),
        tool_result("t2", [{"type": "image", "source": {"type": "base64", "data": PNG}}]),
        assistant(
            bash("t3", "cat > inbox/resp-1.json.tmp && mv inbox/resp-1.json.tmp inbox/resp-1.json")
        ),
        tool_result("t3", ""),
        assistant({"type": "text", "text": "Now observation 2."}),
        assistant(bash("t4", "cat outbox/obs-2.json")),
        tool_result("t4", [{"type": "text", "text": result_text}]),
        assistant(bash("t5", "false")),
        tool_result("t5", "Exit code 1", is_error=True),
        assistant(bash("t6", "test -f outbox/closed.json && echo over")),
        tool_result("t6", "over"),
        {"type": "result", "subtype": "success", "is_error": False, "result": "stopped"},
    )


def traced_run(tmp_path: Path, trace: str, stdout: bytes) -> tuple[Path, Path]:
    """A run of two policy calls whose profile declares `trace`, its actor's output
    `stdout`."""
    run, cases = make_run(tmp_path, proprio=False, run_id="run-trace")
    manifest = run.read_manifest()
    declaration = manifest["profile"]["declaration"] | {
        "actor": {"command": ["agent", "{endpoint}"], "trace": trace}
    }
    manifest["profile"]["declaration"] = declaration
    manifest["profile"]["declaration_sha256"] = declaration_sha256(declaration)
    manifest["transport"]["actor"] = "spawned"  # its output captured
    run.write_manifest(manifest)
    write_result(run, cases[0], 1, outcome="success", executed=10, proprio=False)
    directory = run.episode_dir(cases[0].attempt_id(1))
    (directory / "actor-stdout.log").write_bytes(stdout)
    (directory / "events.jsonl").write_text(
        "".join(
            json.dumps({"t": 1.0, "event": kind, "sequence": n, **fields}) + "\n"
            for n in (1, 2)
            for kind, fields in (
                ("observation_published", {"image_sha256": {}, "feedback": None}),
                ("response_claimed", {"outcome": "accepted", "decision": "act"}),
            )
        )
    )
    return run.root, directory
