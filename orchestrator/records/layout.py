"""Every file and folder of a run directory, named once.

    RUN/manifest.json                  the run's immutable identity
    RUN/plan.json                      the selection plan, byte for byte
    RUN/events.jsonl                   run-level events (launches, resumes, audits, disclosures)
    RUN/audit.json                     the latest blinding audit's verdict
    RUN/para_catalog.json              a kept catalog (its family names it: families/kept.py)
    RUN/.lock                          held by a launch or resume
    RUN/episodes/<attempt>/            one folder per attempt:
        endpoint.json                  its endpoint and case (written before anything is handed)
        launch_message.json            the instructions its actor was handed
        events.jsonl                   its event log
        steps.jsonl                    one row per executed control
        observations/obs-<n>.json      the observations delivered, and their images
        observations/obs-<n>-<camera>.png
        responses/resp-<n>.json        the responses claimed, byte for byte
        videos/<camera>.mp4            the episode's videos (full records)
        actor-stdout.log, actor-stderr.log   its actor's captured output
        provider-requests.jsonl        each model request through the provider gateway (no bodies)
        disclosures.jsonl              leaks disclosed about it
        diagnostics.json               post-episode goal predicates from a replay
        result.json                    written last: the completion marker
        result.corrupt.json            a result that could not be trusted, kept aside

No other module spells these names or builds an attempt's folder: they ask `RunPaths`
and `AttemptPaths`. An attempt's folder is named by its attempt id, `<case id>-a<n>`
(`attempt_id_of`, read back by `split_attempt_id`). The names of observation and
response files are the mailbox's own (`mailroom.mailbox.endpoint`): the run keeps each
under the name it was published as.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mailroom.mailbox.endpoint import image_name, observation_name, response_name

MANIFEST_FILE = "manifest.json"
PLAN_FILE = "plan.json"
EVENTS_FILE = "events.jsonl"
AUDIT_FILE = "audit.json"
LOCK_FILE = ".lock"
EPISODES_DIR = "episodes"

RESULT_FILE = "result.json"
CORRUPT_RESULT_FILE = "result.corrupt.json"
STEPS_FILE = "steps.jsonl"
ENDPOINT_FILE = "endpoint.json"
LAUNCH_MESSAGE_FILE = "launch_message.json"
OBSERVATIONS_DIR = "observations"
RESPONSES_DIR = "responses"
VIDEOS_DIR = "videos"
DISCLOSURES_FILE = "disclosures.jsonl"
DIAGNOSTICS_FILE = "diagnostics.json"
PROVIDER_REQUESTS_FILE = "provider-requests.jsonl"
# The actor's captured output, by stream.
ACTOR_OUTPUT_FILES = {"stdout": "actor-stdout.log", "stderr": "actor-stderr.log"}
# Between a case id and its attempt's number in an attempt id.
_ATTEMPT_MARK = "-a"


def attempt_id_of(case_id: str, attempt: int) -> str:
    """An attempt's identifier, which names its folder (`split_attempt_id` reads it back)."""
    return f"{case_id}{_ATTEMPT_MARK}{attempt}"


def split_attempt_id(attempt_id: str) -> tuple[str, int] | None:
    """The case id and attempt number an attempt id names, or None if it is not one."""
    case_id, sep, number = attempt_id.rpartition(_ATTEMPT_MARK)
    if not sep or not number.isdigit():
        return None
    return case_id, int(number)


@dataclass(frozen=True)
class AttemptPaths:
    """The files of one attempt's folder (`RUN/episodes/<attempt_id>/`)."""

    root: Path

    @property
    def attempt_id(self) -> str:
        return self.root.name

    @property
    def result(self) -> Path:
        return self.root / RESULT_FILE

    @property
    def corrupt_result(self) -> Path:
        return self.root / CORRUPT_RESULT_FILE

    @property
    def events(self) -> Path:
        return self.root / EVENTS_FILE

    @property
    def steps(self) -> Path:
        return self.root / STEPS_FILE

    @property
    def endpoint_mapping(self) -> Path:
        return self.root / ENDPOINT_FILE

    @property
    def launch_message(self) -> Path:
        return self.root / LAUNCH_MESSAGE_FILE

    @property
    def observations(self) -> Path:
        return self.root / OBSERVATIONS_DIR

    @property
    def responses(self) -> Path:
        return self.root / RESPONSES_DIR

    @property
    def videos(self) -> Path:
        return self.root / VIDEOS_DIR

    @property
    def disclosures(self) -> Path:
        return self.root / DISCLOSURES_FILE

    @property
    def diagnostics(self) -> Path:
        return self.root / DIAGNOSTICS_FILE

    @property
    def provider_requests(self) -> Path:
        return self.root / PROVIDER_REQUESTS_FILE

    @property
    def actor_output(self) -> dict[str, Path]:
        """The actor's captured output file of each stream (`stdout`, `stderr`)."""
        return {stream: self.root / name for stream, name in ACTOR_OUTPUT_FILES.items()}

    def observation(self, sequence: int) -> Path:
        return self.observations / observation_name(sequence)

    def observation_image(self, sequence: int, camera: str) -> Path:
        return self.observations / image_name(sequence, camera)

    def response(self, sequence: int) -> Path:
        return self.responses / response_name(sequence)

    def video(self, camera: str) -> Path:
        return self.videos / f"{camera}.mp4"

    def relative(self, path: Path) -> str:
        """`path`, a file of this attempt, as named from the attempt's folder."""
        return path.relative_to(self.root).as_posix()


@dataclass(frozen=True)
class RunPaths:
    """The files of a run directory."""

    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST_FILE

    @property
    def plan(self) -> Path:
        return self.root / PLAN_FILE

    @property
    def events(self) -> Path:
        return self.root / EVENTS_FILE

    @property
    def audit(self) -> Path:
        return self.root / AUDIT_FILE

    @property
    def lock(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def episodes(self) -> Path:
        return self.root / EPISODES_DIR

    def attempt(self, attempt_id: str) -> AttemptPaths:
        return AttemptPaths(self.episodes / attempt_id)
