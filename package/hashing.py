"""Content hashes used as identities in private records.

A hash of a file is over the file's bytes (`sha256_bytes`, `sha256_file`): the frozen
catalog, a BDDL file, a video, a claimed response. A hash of a JSON document is over one
form of it only, `canonical_bytes`, so that whoever recomputes it from the document,
in any language, gets the same hash; the form a file is published in
(`mailroom.mailbox.publish.document_bytes`) is for people and is never hashed as a
document.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def sha256_bytes(data: bytes) -> str:
    """sha256 of bytes as they are: `catalog_sha256` (the frozen file), a claimed
    response's `sha256`, `image_sha256`, `state_sha256`, `instructions_sha256`."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes, read in blocks: `bddl_sha256`, `init_states_sha256`,
    a video's `sha256`."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def canonical_bytes(document: object) -> bytes:
    """The bytes a JSON document's content hash is computed over: UTF-8, keys sorted,
    separators ',' and ':' with no other white space, non-ASCII kept, no NaN.

    Used by `plan_sha256` (as `schemas/mailroom.plan.v1.json` defines it), through
    `hash_document`. The manifest's `declaration_sha256` keeps the form it was first
    recorded in (`orchestrator/campaign/manifest.py` says why).
    """
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def hash_document(document: object) -> str:
    """sha256 of `canonical_bytes(document)`: the plan's `plan_sha256`."""
    return sha256_bytes(canonical_bytes(document))
