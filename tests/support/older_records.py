"""Documents as an earlier version wrote them, made from current ones: the old run
directories the upgrade must keep readable. Each is checked against its frozen schema."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from mailroom.mailbox.schemas import schema_errors

Doc = dict[str, Any]
MANIFEST = "mailroom.run_manifest/v"


def _drop(document: Doc, *path: str) -> None:
    *parents, last = path
    node = document
    for part in parents:
        node = node[part]
    del node[last]


def manifest_as(manifest: Doc, version: int) -> Doc:
    """A current manifest as run manifest v`version` recorded it (v1 to v7)."""
    older = copy.deepcopy(manifest)
    if version <= 7:
        assert older["protocol"]["actor_guide_sha256"] is None, "protocol v2 is v8's"
        _drop(older, "protocol", "actor_guide_sha256")
        # Before v8 every manifest wrote LIBERO's transform, whatever the family.
        older["protocol"]["camera_transform"] = "image[::-1, ::-1]"
    if version <= 6 and not older["profile"]["programs"]:
        _drop(older, "profile", "programs")  # absent when none was copied, before v7
    if version <= 5:
        _drop(older, "provider_gateway")
        _drop(older, "volatile", "provider_upstream")
    if version <= 4:
        _drop(older, "enforcement")
    if version <= 3:
        _drop(older, "protocol", "benchmark")
    if version <= 2:
        _drop(older, "blinding", "instructions_version")
        older["profile"].pop("programs", None)
    if version <= 1:
        _drop(older, "confinement")
    older["schema"] = f"{MANIFEST}{version}"
    errors = schema_errors(older["schema"], older)
    assert errors == [], f"not a {older['schema']} document: {errors[0]}"
    return older


# Results (`mailroom.episode_result/vN`), rewritten in place in their file.


def result_as_v5(path: Path) -> None:
    """The result at `path` as v5 wrote it: everything but what the kernel enforced."""
    document = json.loads(path.read_text())
    document["schema"] = "mailroom.episode_result/v5"
    del document["enforcement"]
    assert schema_errors("mailroom.episode_result/v5", document) == []
    path.write_text(json.dumps(document))


def result_as_v4(path: Path) -> None:
    """The result at `path` as v4 wrote it: everything but how its simulator was held
    (and what the kernel enforced)."""
    result_as_v5(path)
    document = json.loads(path.read_text())
    document["schema"] = "mailroom.episode_result/v4"
    del document["simulator"]
    assert schema_errors("mailroom.episode_result/v4", document) == []
    path.write_text(json.dumps(document))


def result_as_v1(path: Path) -> None:
    """The result at `path` as v1 wrote it: before confinement, queueing and processing
    times, instructions versions, simulator holding and enforcement were recorded."""
    document = json.loads(path.read_text())
    document["schema"] = "mailroom.episode_result/v1"
    later = ("confinement", "queue_delay", "processing", "instructions_version", "simulator")
    for name in (*later, "enforcement"):
        del document[name]
    assert schema_errors("mailroom.episode_result/v1", document) == []
    path.write_text(json.dumps(document))
