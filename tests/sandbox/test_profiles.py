"""Method profiles: one typed model, loaded by name or path, and what launch makes of it.

The refusals run the real CLI (nothing is written, nothing is left behind); what an
actor finds on its PATH and which files it sees runs in the real sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, assert_usage_error, cli_plan, run_cli
from mailroom.orchestrator.actors.actor_program import COPY_CAP_BYTES, SAFE_PATH
from mailroom.orchestrator.actors.confinement import ConfinementError, ConfinementSettings
from mailroom.orchestrator.actors.launcher import process_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.profiles import (
    INSTRUCTION_FILES,
    MethodProfile,
    ProfileError,
    actor_instructions_template,
    declared_instructions,
    load_profile,
    shipped_agents,
)
from mailroom.orchestrator.cli.launch_profile import profile_actor_command
from sandboxed_starts import run_once_in_sandbox


def _write_profile(folder: Path, **fields: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    document = {"profile": "my_method", "method_family": "code_agent_direct_control", **fields}
    (folder / "profile.json").write_text(json.dumps(document))
    return folder / "profile.json"


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder a sandbox user can read (pytest's own are owner-only)."""
    folder = Path(tempfile.mkdtemp(prefix="mailroom-test-tool-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_every_shipped_profile_loads_by_name() -> None:
    """Each agent folder of the checkout is found through the package's resources, at
    its real place (an editable install's links resolved)."""
    on_disk = sorted(p.parent.name for p in (REPO / "agents").glob("*/profile.json"))
    assert {"anonymous_code_agent", "scripted_diagnostic", "claude_code", "codex_cli"} <= set(
        on_disk
    )
    assert list(shipped_agents()) == on_disk
    for name in on_disk:
        loaded = load_profile(name)
        assert loaded.name == name
        assert loaded.directory == REPO / "agents" / name


def test_an_unknown_profile_name_lists_the_shipped_ones() -> None:
    with pytest.raises(ProfileError, match=r"no method profile 'nobody'.*scripted_diagnostic"):
        load_profile("nobody")


def test_a_profile_loads_by_path_to_its_file_or_folder(tmp_path: Path) -> None:
    file = _write_profile(tmp_path / "mine", actor={"command": ["{profile_dir}/run.sh"]})
    by_file, by_folder = load_profile(str(file)), load_profile(str(file.parent))
    assert by_file == by_folder
    assert by_file.directory == file.parent.resolve()
    command = profile_actor_command(by_file, None)
    assert command == [f"{file.parent.resolve()}/run.sh"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"actor": {"comand": ["x"]}}, "actor.comand: Extra inputs are not permitted"),
        ({"limits": {"memory": 3}}, "limits.memory: Extra inputs are not permitted"),
        ({"instructions": "prompts/other.txt"}, "unknown actor instructions"),
        ({"actor": {"command": []}}, "actor.command"),
        ({"actor": {"command": ["a"], "model_arguments": ["-m"]}}, "must contain {model}"),
        ({"actor": {"command": ["a"], "environment": {"PATH": "/x"}}}, "always set"),
        (
            {
                "declared_models": [
                    {"role": "a", "identity": "b", "provider": "c", "verified": True}
                ]
            },
            "declared_models.0.verified",
        ),
        ({"confinement": {"pass_env": ["K"], "pass_env_optional": ["K"]}}, "both required"),
    ],
)
def test_unknown_or_wrong_fields_are_refused_with_where(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    file = _write_profile(tmp_path / "bad", **fields)
    with pytest.raises(ProfileError, match="refused") as refused:
        load_profile(str(file))
    assert message in str(refused.value)


def test_unknown_names_and_paths_are_refused() -> None:
    with pytest.raises(ProfileError, match=r"no method profile 'nope' among the shipped agents"):
        load_profile("nope")
    with pytest.raises(ProfileError, match="no profile at"):
        load_profile("/nonexistent/profile.json")


def test_a_named_model_is_recorded_declared_and_unverified_and_passed() -> None:
    loaded = load_profile("scripted_diagnostic")
    mine = MethodProfile.model_validate(
        {
            **loaded.profile.declaration(),
            "declared_models": [
                {"role": "actor", "identity": "unknown", "provider": "acme", "verified": False}
            ],
            "actor": {"command": ["agent", "{endpoint}"], "model_arguments": ["--model={model}"]},
        }
    )
    named = mine.with_model("acme-large-2")
    (model,) = named.declaration()["declared_models"]
    assert model["identity"] == "acme-large-2" and model["provider"] == "acme"
    assert model["verified"] is False and "unverified" in model["note"]
    assert mine.with_model(None) is mine  # no model named: the actor's own, unknown
    with pytest.raises(ProfileError, match="not a model name"):
        mine.with_model("a b; rm -rf /")


def test_instruction_versions_are_frozen_files_named_by_the_declaration() -> None:
    assert declared_instructions({}) == "v1"  # runs recorded before versions existed
    assert declared_instructions({"instructions": "prompts/actor_instructions.txt"}) == "v1"
    for version, name in INSTRUCTION_FILES.items():
        assert declared_instructions({"instructions": version}) == version
        text = actor_instructions_template(version)
        assert text == (Path(__file__).parents[2] / "prompts" / name).read_text()


def test_launch_refuses_an_unset_provider_key_by_name_and_leaves_nothing(
    tmp_path: Path, open_folder: Path
) -> None:
    profile = _write_profile(
        tmp_path / "keyed",
        actor={"command": ["/bin/sh", "-c", "exit 0"]},
        confinement={"network": "host", "pass_env": ["MAILROOM_TEST_UNSET_KEY"]},
    )
    plan = cli_plan(tmp_path / "plan.json", "fast")
    env = {k: v for k, v in os.environ.items() if k != "MAILROOM_TEST_UNSET_KEY"}
    root = open_folder / "mb"
    refused = run_cli(
        *("launch", str(plan), "--profile", str(profile)),
        *("--run-dir", str(tmp_path / "run"), "--mailbox-root", str(root)),
        env=env,
    )
    assert refused.returncode == 2, refused.stderr
    assert "MAILROOM_TEST_UNSET_KEY" in refused.stdout + refused.stderr
    assert not (tmp_path / "run").exists() and not root.exists()


def test_a_program_the_sandbox_cannot_find_is_refused_before_anything_exists(
    tmp_path: Path, open_folder: Path
) -> None:
    plan = cli_plan(tmp_path / "plan.json", "fast")
    root = open_folder / "mb"
    for actor, said in (
        ("no-such-agent-cli -p", "not on the sandbox's PATH"),
        (f"{open_folder}/missing-agent", "not visible inside the sandbox"),
    ):
        refused = run_cli(
            *("launch", str(plan), "--profile", "anonymous_code_agent", "--actor", actor),
            *("--run-dir", str(tmp_path / "run"), "--mailbox-root", str(root)),
        )
        assert refused.returncode == 2, refused.stderr
        assert said in refused.stderr and refused.stdout == ""
        assert not (tmp_path / "run").exists() and not root.exists()


def test_a_model_for_a_profile_without_a_way_to_pass_it_is_a_usage_error(
    tmp_path: Path,
) -> None:
    plan = cli_plan(tmp_path / "plan.json", "fast")
    refused = run_cli(
        *("launch", str(plan), "--profile", "scripted_diagnostic", "--model", "m1"),
        *("--run-dir", str(tmp_path / "run")),
    )
    assert_usage_error(refused, "declares no way to pass a model")


def _run_once(
    launcher_command: list[str], read_only: tuple[str, ...]
) -> tuple[Path, dict[str, object]]:
    launcher = process_launcher(
        launcher_command,
        ActorLimits(scratch_quota_mb=8),
        confinement=ConfinementSettings(mode="sandbox", read_only_paths=read_only),
        mailbox_root=None,
    )
    root = Path(tempfile.mkdtemp(prefix="mailroom-test-"))
    os.chmod(root, 0o711)
    out = Path(tempfile.mkdtemp(prefix="mailroom-test-out-"))
    endpoint, described, _, _ = run_once_in_sandbox(launcher, root, out)
    return endpoint.scratch, described


def test_programs_of_a_declared_folder_are_on_the_actors_path(open_folder: Path) -> None:
    tool = open_folder / "bin" / "my-agent"
    tool.parent.mkdir()
    tool.write_text('#!/bin/sh\necho "ran as $(id -u) with PATH=$PATH" > "$HOME/said.txt"\n')
    tool.chmod(0o755)
    hidden = open_folder / "share" / "not-a-program"
    hidden.parent.mkdir()
    hidden.write_text("data")
    scratch, described = _run_once(["my-agent", "{endpoint}"], (str(open_folder),))
    said = (scratch / "said.txt").read_text()
    assert said == f"ran as 1000 with PATH={SAFE_PATH}:{open_folder}/bin\n"
    env = described["env"]
    assert isinstance(env, dict) and env["PATH"] == f"{SAFE_PATH}:{open_folder}/bin"


def test_a_large_program_inside_a_declared_folder_is_seen_there_never_copied(
    open_folder: Path,
) -> None:
    big = open_folder / "agent-binary"
    with big.open("wb") as handle:
        handle.write(b'#!/bin/sh\necho "big and whole" > "$HOME/said.txt"\nexit 0\n')
        handle.truncate(COPY_CAP_BYTES + (1 << 20))  # sparse: larger than any copy
    big.chmod(0o755)
    launcher = process_launcher(
        [str(big), "{endpoint}"],
        confinement=ConfinementSettings(mode="sandbox", read_only_paths=(str(open_folder),)),
    )
    assert launcher.program.copied_files == ()
    assert launcher.program.argv[0] == str(big)
    scratch, _ = _run_once([str(big), "{endpoint}"], (str(open_folder),))
    assert (scratch / "said.txt").read_text() == "big and whole\n"
    # Outside a declared folder the same file is still refused, naming the way out.
    elsewhere = Path(tempfile.mkdtemp(prefix="mailroom-test-big-"))
    try:
        os.chmod(elsewhere, 0o755)
        shutil.copy(big, elsewhere / "agent-binary")
        with pytest.raises(ConfinementError, match="declare its folder with --actor-path"):
            process_launcher([str(elsewhere / "agent-binary")])
    finally:
        shutil.rmtree(elsewhere)


def test_a_script_whose_interpreter_is_missing_inside_is_refused(open_folder: Path) -> None:
    script = open_folder / "agent"
    script.write_text("#!/usr/bin/env no-such-interpreter-xyz\nprint('x')\n")
    script.chmod(0o755)
    with pytest.raises(ConfinementError, match="no-such-interpreter-xyz"):
        process_launcher(
            ["agent"],
            confinement=ConfinementSettings(mode="sandbox", read_only_paths=(str(open_folder),)),
        )


@pytest.mark.parametrize(
    ("folder", "kind"),
    [("libero_10_boxes", "suite"), ("mb-2026-12-02", "date"), ("run-of-mine", "run id")],
)
def test_a_mailbox_root_naming_a_private_word_is_refused_before_anything_exists(
    tmp_path: Path, open_folder: Path, folder: str, kind: str
) -> None:
    plan = cli_plan(tmp_path / "plan.json", "fast")
    root = open_folder / folder
    refused = run_cli(
        *("launch", str(plan), "--profile", "scripted_diagnostic"),
        *("--run-dir", str(tmp_path / "run-of-mine"), "--mailbox-root", str(root)),
    )
    assert refused.returncode == 2, refused.stderr
    flat = " ".join(refused.stderr.split())
    assert "names what an actor must not learn" in flat and kind in flat
    assert not (tmp_path / "run-of-mine").exists() and not root.exists()


def test_a_refused_launch_leaves_no_default_mailbox_root_behind(
    tmp_path: Path, open_folder: Path
) -> None:
    """The default mailbox root is a fresh folder under the temporary folder: made, then
    removed again when the launch is refused after it was made."""
    plan = cli_plan(tmp_path / "plan.json", "fast")
    env = {**os.environ, "TMPDIR": str(open_folder)}
    for actor in ("no-such-agent-cli -p", "/usr/bin/true {endpoint} --quiet"):
        refused = run_cli(
            *("launch", str(plan), "--profile", "anonymous_code_agent", "--actor", actor),
            *("--run-dir", str(tmp_path / "run"), "--executor", "ray"),
            *("--ray-address", "127.0.0.1:1"),
            env=env,
        )
        assert refused.returncode in (2, 9), refused.stderr
        assert list(open_folder.iterdir()) == []


def test_a_model_named_beside_the_coordinators_own_actor_is_recorded_not_passed() -> None:
    loaded = load_profile("claude_code")
    (named,) = loaded.profile.with_model("m-2", passed=False).declaration()["declared_models"]
    assert named["identity"] == "m-2" and "not passed by mailroom" in named["note"]
    command = profile_actor_command(loaded, "m-2")
    assert command is not None and command[-2:] == ["--model", "m-2"]


def test_an_agent_whose_state_lives_in_the_sandboxs_tmp_is_refused_unconfined() -> None:
    """Unconfined, /tmp is the machine's: episodes would share the agent's memory."""
    with pytest.raises(ConfinementError, match=r"CLAUDE_CONFIG_DIR.*run it confined"):
        process_launcher(
            ["claude", "-p"],
            confinement=ConfinementSettings(mode="none"),
            environment={"CLAUDE_CONFIG_DIR": "/tmp/claude-code"},
        )
