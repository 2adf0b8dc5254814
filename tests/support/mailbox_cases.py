"""The adversarial response files of the contract suite, and how each is put in place.

Shared by the contract suite (the real watcher, claim and parser), the parser's, the
transport's and the offline check-response tests. Each case writes one entry under the
awaited response name and states the exact typed outcome the loop must reach.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mailroom.mailbox.parser import (
    MAX_RESPONSE_BYTES,
    Accepted,
    ActionLimits,
    Invalid,
    ParseOutcome,
    ProtocolError,
)

REQUEST_ID = "5f0c3a9e8d7b6a5f4e3d2c1b0a998877"
OTHER_REQUEST_ID = "0123456789abcdef0123456789abcdef"
MAX_CHUNK = 5
LIMITS = ActionLimits(max_chunk=MAX_CHUNK)
VECTOR = [0.0, 0.0, -0.2, 0.0, 0.0, 0.0, -1.0]
DROP = object()

Kind = Literal["accepted", "invalid", "protocol_error", "timeout"]
Verdict = tuple[Kind, tuple[str, ...]]
# Puts one entry at `target` (the inbox path), with `outside` a directory beyond the
# endpoint; returns the bytes the entry holds, when it is a file of its own.
Maker = Callable[[Path, Path], bytes | None]


def verdict(outcome: ParseOutcome | None) -> Verdict:
    """A comparable form of an outcome: kind and codes (None means no response seen)."""
    if outcome is None:
        return ("timeout", ())
    if isinstance(outcome, Accepted):
        return ("accepted", (outcome.decision,))
    if isinstance(outcome, Invalid):
        return ("invalid", tuple(i.code for i in outcome.issues))
    assert isinstance(outcome, ProtocolError)
    return ("protocol_error", (outcome.reason.value,))


def response(**fields: object) -> dict[str, object]:
    """A valid act response with `fields` replaced (DROP removes one)."""
    doc: dict[str, object] = {
        "schema": "mailroom.response/v1",
        "request_id": REQUEST_ID,
        "decision": "act",
        "actions": [VECTOR, VECTOR],
    }
    doc.update(fields)
    return {k: v for k, v in doc.items() if v is not DROP}


def encode(doc: object) -> bytes:
    return json.dumps(doc).encode("utf-8")


def stop(**fields: object) -> dict[str, object]:
    return response(**{"decision": "stop", "actions": DROP, **fields})


def write_atomically(target: Path, data: bytes) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)


@dataclass(frozen=True)
class Written:
    """A maker that writes `data` under the target name, atomically or in place."""

    data: bytes
    atomically: bool = True

    def __call__(self, target: Path, outside: Path) -> bytes:
        if self.atomically:
            write_atomically(target, self.data)
        else:
            with target.open("wb") as fh:
                fh.write(self.data)
        return self.data


def atomic(data: bytes) -> Written:
    return Written(data)


def in_place(data: bytes) -> Written:
    return Written(data, atomically=False)


def symlink_to_outside(target: Path, outside: Path) -> None:
    secret = outside / "secret.json"
    secret.write_bytes(encode(response()))
    os.symlink(secret, target)


def dangling_symlink(target: Path, outside: Path) -> None:
    os.symlink(outside / "nothing-here.json", target)


def fifo(target: Path, outside: Path) -> None:
    os.mkfifo(target)


def directory(target: Path, outside: Path) -> None:
    target.mkdir()
    (target / "resp-1.json").write_bytes(encode(response()))


def hard_link(target: Path, outside: Path) -> None:
    kept = outside / "kept.json"
    kept.write_bytes(encode(response()))
    os.link(kept, target)


def entry(make: Callable[[Path, Path], None]) -> Maker:
    def wrapped(target: Path, outside: Path) -> None:
        make(target, outside)
        return None

    return wrapped


def misnamed(name: str) -> Maker:
    def make(target: Path, outside: Path) -> None:
        write_atomically(target.with_name(name), encode(response()))
        return None

    return make


@dataclass(frozen=True)
class Case:
    name: str
    make: Maker
    expect: Verdict

    @property
    def data(self) -> bytes | None:
        """The file's bytes, for cases that are a regular file of their own."""
        return self.make.data if isinstance(self.make, Written) else None


def _padded_to(size: int) -> bytes:
    data = encode(response())
    return data + b" " * (size - len(data))


def _nested(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


def invalid(*codes: str) -> Verdict:
    return ("invalid", codes)


def refused(reason: str) -> Verdict:
    return ("protocol_error", (reason,))


VALID = encode(response())
WITH_NAN = VALID.replace(b"-0.2", b"NaN", 1)

CASES: list[Case] = [
    # Accepted, including the edges of every bound.
    Case("act", atomic(VALID), ("accepted", ("act",))),
    Case("stop", atomic(encode(stop())), ("accepted", ("stop",))),
    Case("stop_with_note", atomic(encode(stop(note="done"))), ("accepted", ("stop",))),
    Case(
        "full_chunk_at_bounds",
        atomic(encode(response(actions=[[-1, 1, -1.0, 1.0, 0, 0, 1]] * MAX_CHUNK))),
        ("accepted", ("act",)),
    ),
    Case("exactly_the_size_cap", atomic(_padded_to(MAX_RESPONSE_BYTES)), ("accepted", ("act",))),
    Case("note_of_280", atomic(encode(stop(note="n" * 280))), ("accepted", ("stop",))),
    # Bytes and JSON text.
    Case("empty_file", in_place(b""), invalid("empty_file")),
    Case("malformed_json", atomic(VALID[: len(VALID) // 2]), invalid("malformed_json")),
    Case("trailing_data", atomic(VALID + b"{}"), invalid("malformed_json")),
    Case("byte_order_mark", atomic(b"\xef\xbb\xbf" + VALID), invalid("byte_order_mark")),
    Case(
        "non_utf8",
        atomic(encode(stop(note="cafe")).replace(b"cafe", b"caf\xe9")),
        invalid("invalid_encoding"),
    ),
    Case("utf16", atomic(VALID.decode().encode("utf-16")), invalid("invalid_encoding")),
    Case("nan_literal", atomic(WITH_NAN), invalid("non_finite_literal")),
    Case(
        "infinity_literal",
        atomic(VALID.replace(b"-0.2", b"Infinity", 1)),
        invalid("non_finite_literal"),
    ),
    Case(
        "minus_infinity_literal",
        atomic(VALID.replace(b"-0.2", b"-Infinity", 1)),
        invalid("non_finite_literal"),
    ),
    Case(
        "overflowing_1e999",
        atomic(VALID.replace(b"-0.2", b"1e999", 1)),
        invalid("non_finite_value"),
    ),
    Case(
        "duplicate_keys",
        atomic(VALID.replace(b'"decision": "act"', b'"decision": "act", "decision": "stop"')),
        invalid("duplicate_key"),
    ),
    Case("depth_bomb", atomic(_nested(30000).encode()), invalid("too_deep")),
    Case(
        "depth_nine",
        atomic(encode(stop()).replace(b"}", b', "x": ' + _nested(8).encode() + b"}")),
        invalid("too_deep"),
    ),
    Case(
        "depth_eight_is_only_unknown",
        atomic(encode(stop()).replace(b"}", b', "x": ' + _nested(7).encode() + b"}")),
        invalid("unknown_field"),
    ),
    Case("ten_megabytes", atomic(_padded_to(10 * 1024 * 1024)), invalid("too_large")),
    Case("one_byte_over_the_cap", atomic(_padded_to(MAX_RESPONSE_BYTES + 1)), invalid("too_large")),
    Case(
        "unpaired_surrogate",
        atomic(encode(stop(note="x")).replace(b'"x"', b'"\\ud800"')),
        invalid("unpaired_surrogate"),
    ),
    Case("top_level_array", atomic(b"[]"), invalid("not_an_object")),
    Case("top_level_null", atomic(b"null"), invalid("not_an_object")),
    # Fields.
    Case(
        "wrong_schema_version",
        atomic(encode(response(schema="mailroom.response/v2"))),
        invalid("wrong_schema_version"),
    ),
    Case("missing_schema", atomic(encode(response(schema=DROP))), invalid("missing_field")),
    Case("missing_request_id", atomic(encode(response(request_id=DROP))), invalid("missing_field")),
    Case("missing_decision", atomic(encode(response(decision=DROP))), invalid("missing_field")),
    Case("act_without_actions", atomic(encode(response(actions=DROP))), invalid("missing_field")),
    Case("extra_field", atomic(encode(response(confidence=0.9))), invalid("unknown_field")),
    Case("bad_decision", atomic(encode(response(decision="jump"))), invalid("bad_decision")),
    Case(
        "stop_with_actions",
        atomic(encode(response(decision="stop"))),
        invalid("actions_not_allowed"),
    ),
    Case("note_too_long", atomic(encode(stop(note="n" * 281))), invalid("bad_note")),
    Case("note_not_a_string", atomic(encode(stop(note=5))), invalid("bad_note")),
    # The request id.
    Case(
        "wrong_request_id",
        atomic(encode(response(request_id=OTHER_REQUEST_ID))),
        refused("request_id_mismatch"),
    ),
    Case(
        "placeholder_request_id",
        atomic(encode(response(request_id="<request_id from the observation>"))),
        invalid("bad_request_id"),
    ),
    Case("numeric_request_id", atomic(encode(response(request_id=123))), invalid("bad_request_id")),
    Case(
        "uppercase_request_id",
        atomic(encode(response(request_id=REQUEST_ID.upper()))),
        invalid("bad_request_id"),
    ),
    # Actions.
    Case(
        "vector_of_6",
        atomic(encode(response(actions=[VECTOR[:6]]))),
        invalid("wrong_vector_length"),
    ),
    Case(
        "vector_of_8",
        atomic(encode(response(actions=[[*VECTOR, 0.0]]))),
        invalid("wrong_vector_length"),
    ),
    Case(
        "string_number",
        atomic(encode(response(actions=[["0.5", *VECTOR[1:]]]))),
        invalid("non_numeric_value"),
    ),
    Case(
        "boolean",
        atomic(encode(response(actions=[[True, *VECTOR[1:]]]))),
        invalid("non_numeric_value"),
    ),
    Case(
        "null_number",
        atomic(encode(response(actions=[[None, *VECTOR[1:]]]))),
        invalid("non_numeric_value"),
    ),
    Case(
        "out_of_bounds",
        atomic(encode(response(actions=[[1.5, *VECTOR[1:]]]))),
        invalid("out_of_bounds"),
    ),
    Case(
        "just_below_minus_one",
        atomic(encode(response(actions=[[-1.0000001, *VECTOR[1:]]]))),
        invalid("out_of_bounds"),
    ),
    Case(
        "huge_integer",
        atomic(encode(response(actions=[[10**400, *VECTOR[1:]]]))),
        invalid("out_of_bounds"),
    ),
    Case("empty_chunk", atomic(encode(response(actions=[]))), invalid("empty_chunk")),
    Case(
        "over_long_chunk",
        atomic(encode(response(actions=[VECTOR] * (MAX_CHUNK + 1)))),
        invalid("chunk_too_long"),
    ),
    Case(
        "chunk_beyond_the_schema",
        atomic(encode(response(actions=[VECTOR] * 65))),
        invalid("chunk_too_long"),
    ),
    Case(
        "actions_not_a_list",
        atomic(encode(response(actions={"0": VECTOR}))),
        invalid("bad_actions"),
    ),
    Case(
        "vector_not_a_list", atomic(encode(response(actions=[VECTOR, 0.5]))), invalid("bad_actions")
    ),
    Case(
        "many_problems_in_order",
        atomic(encode(response(actions=[["x", 2.0, *VECTOR[2:], 0.0]], confidence=1))),
        invalid("unknown_field", "wrong_vector_length", "non_numeric_value", "out_of_bounds"),
    ),
    # Not a regular file of its own: refused, never read.
    Case("symlink_to_a_file_outside", entry(symlink_to_outside), refused("symlink")),
    Case("dangling_symlink", entry(dangling_symlink), refused("symlink")),
    Case("fifo", entry(fifo), refused("not_regular_file")),
    Case("directory_named_like_a_response", entry(directory), refused("not_regular_file")),
    Case("hard_link", entry(hard_link), refused("hard_link")),
    # Not the awaited name: ignored, the wait goes on.
    Case("misnamed", misnamed("response-1.json"), ("timeout", ())),
    Case("hidden_temporary", misnamed(".resp-1.json.tmp"), ("timeout", ())),
    Case("leading_zero", misnamed("resp-01.json"), ("timeout", ())),
    Case("upper_case_extension", misnamed("resp-1.JSON"), ("timeout", ())),
]

CLAIMED = ("accepted", "invalid")
LEFT_IN_PLACE = {"symlink", "not_regular_file", "hard_link"}
