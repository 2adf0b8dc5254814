"""The frozen parser as a pure function: total, deterministic, and in step with the schema."""

from __future__ import annotations

import json
import random

import pytest
from mailbox_cases import (
    CASES,
    LIMITS,
    OTHER_REQUEST_ID,
    REQUEST_ID,
    VALID,
    encode,
    response,
    verdict,
)
from mailroom.mailbox.parser import (
    MAX_DEPTH,
    Accepted,
    ActionLimits,
    Invalid,
    ProtocolError,
    _max_nesting_of_text,
    decode_document,
    parse_response,
    validate_actions,
)
from mailroom.mailbox.schemas import schema_errors

FILE_CASES = {c.name: c for c in CASES if c.expect[0] in ("accepted", "invalid")} | {
    "wrong_request_id": next(c for c in CASES if c.name == "wrong_request_id")
}


def _bytes_of(name: str) -> bytes:
    data = FILE_CASES[name].data
    assert data is not None
    return data


@pytest.mark.parametrize("name", sorted(FILE_CASES))
def test_each_case_has_one_verdict_without_the_filesystem(name: str) -> None:
    data = _bytes_of(name)
    outcome = parse_response(data, expected_request_id=REQUEST_ID, limits=LIMITS)
    assert verdict(outcome) == FILE_CASES[name].expect
    assert outcome == parse_response(data, expected_request_id=REQUEST_ID, limits=LIMITS)


_TOKENS = [
    b"NaN",
    b"-Infinity",
    b"1e999",
    b"\xff",
    b"\xef\xbb\xbf",
    b"[[[[[",
    b"]",
    b"}",
    b'"',
    b"\\ud800",
    b"null",
    b"true",
    b"10" * 40,
    b",",
    b":",
    b"\x00",
    b'"decision"',
]


def _mutations(rng: random.Random, n: int) -> list[bytes]:
    seeds = [VALID, encode(response(decision="stop", actions=None)), b"{}", b"[]"]
    out: list[bytes] = []
    for _ in range(n):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data) + 1)
            action = rng.randrange(4)
            if action == 0 and data:
                data[at % len(data)] = rng.randrange(256)
            elif action == 1:
                data[at:at] = rng.choice(_TOKENS)
            elif action == 2:
                del data[at : at + rng.randint(1, 8)]
            else:
                data = data[:at]
        out.append(bytes(data))
    out.extend(bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))) for _ in range(200))
    return out


def test_no_byte_string_escapes_as_an_exception() -> None:
    rng = random.Random(20260907)
    for data in _mutations(rng, 5000):
        outcome = parse_response(data, expected_request_id=REQUEST_ID, limits=LIMITS)
        assert isinstance(outcome, Accepted | Invalid | ProtocolError)
        assert outcome == parse_response(data, expected_request_id=REQUEST_ID, limits=LIMITS)
        if isinstance(outcome, Invalid):
            assert outcome.issues and all(i.code for i in outcome.issues)


def test_decoding_checks_run_in_a_fixed_order() -> None:
    # Each pair fails two checks; the earlier one always decides.
    assert verdict(decode_document(b"\xef\xbb\xbf\xff")) == ("invalid", ("byte_order_mark",))  # type: ignore[arg-type]
    assert verdict(decode_document(b"[" * 20 + b"NaN")) == ("invalid", ("too_deep",))  # type: ignore[arg-type]
    assert verdict(decode_document(b'{"a": NaN, "a": 1}')) == ("invalid", ("non_finite_literal",))  # type: ignore[arg-type]


def test_depth_counts_containers_as_the_text_shows_them() -> None:
    deepest_allowed = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert decode_document(deepest_allowed.encode()) == json.loads(deepest_allowed)
    too_deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    assert verdict(decode_document(too_deep.encode())) == ("invalid", ("too_deep",))  # type: ignore[arg-type]


def _nesting_char_by_char(text: str) -> int:
    """The plain reading of bracket depth, one character at a time."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def test_the_depth_scan_reads_text_as_a_character_by_character_scan_does() -> None:
    rng = random.Random(20261130)
    alphabet = '[]{}"\\ a,:u'
    texts = ['"\\\\"[[', '"\\"[[', '"[["[[', '\\"[', "[" * 9, '{"a": "\\\\\\"[[[[[[[[["}']
    texts += [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(20000)
    ]
    for text in texts:
        assert _max_nesting_of_text(text) == _nesting_char_by_char(text), text


def test_decoded_depth_is_the_depth_the_text_scan_saw() -> None:
    # The decoder checks depth on the text only: for any text json accepts, that is
    # the decoded value's container depth.
    def container_depth(value: object) -> int:
        if isinstance(value, dict):
            return 1 + max((container_depth(v) for v in value.values()), default=0)
        if isinstance(value, list):
            return 1 + max((container_depth(v) for v in value), default=0)
        return 0

    rng = random.Random(7)
    for _ in range(3000):
        value = _random_json(rng, MAX_DEPTH)
        text = json.dumps(value)
        assert _max_nesting_of_text(text) == container_depth(value)


def _random_json(rng: random.Random, depth: int) -> object:
    roll = rng.random()
    if depth == 0 or roll < 0.3:
        return rng.choice([1, -2.5, "x", '["{', "\\u005b", True, None, "\\"])
    if roll < 0.65:
        return [_random_json(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {
        rng.choice(["a", "[", '"', "}"]) + str(i): _random_json(rng, depth - 1)
        for i in range(rng.randint(0, 3))
    }


def test_a_lone_surrogate_is_found_with_or_without_other_escapes() -> None:
    for text in ('{"a": "\\ud800"}', '{"\\ud800": 1}', '["\\u0041", "\\udfff"]'):
        assert verdict(decode_document(text.encode())) == ("invalid", ("unpaired_surrogate",))  # type: ignore[arg-type]
    assert decode_document(b'["\\ud83d\\ude00"]') == ["\U0001f600"]


def test_a_foreign_request_id_is_terminal_whatever_else_is_wrong() -> None:
    data = encode(response(request_id=OTHER_REQUEST_ID, actions=[[9] * 3], extra=1))
    outcome = parse_response(data, expected_request_id=REQUEST_ID, limits=LIMITS)
    assert verdict(outcome) == ("protocol_error", ("request_id_mismatch",))


def test_accepted_actions_are_floats_exactly_as_sent() -> None:
    data = encode(response(actions=[[1, -1, 0, 0.5, -0.25, 0, 1]], note="n"))
    outcome = parse_response(data, expected_request_id=REQUEST_ID, limits=LIMITS)
    assert outcome == Accepted("act", ((1.0, -1.0, 0.0, 0.5, -0.25, 0.0, 1.0),), note="n")
    assert all(type(x) is float for x in outcome.actions[0])


def test_the_shared_action_validator_reports_every_value() -> None:
    issues = validate_actions([[2, "a", None, float("inf"), 0, 0]], ActionLimits(max_chunk=1))
    assert [i.code for i in issues] == [
        "wrong_vector_length",
        "out_of_bounds",
        "non_numeric_value",
        "non_numeric_value",
        "non_finite_value",
    ]


@pytest.mark.parametrize("name", sorted(FILE_CASES))
def test_the_frozen_schema_agrees_with_the_hand_checks(name: str) -> None:
    """Wherever the document decodes to an object, schema and parser agree on validity.

    The parser is stricter in two declared ways only: the run's chunk limit (the schema
    allows up to 64) and the awaited request id.
    """
    data = _bytes_of(name)
    value = decode_document(data)
    outcome = parse_response(data, expected_request_id=REQUEST_ID, limits=LIMITS)
    if isinstance(value, Invalid):
        # Bytes that never decode (empty, too large, a BOM, not UTF-8, too deep, a
        # duplicate key, NaN...): no schema can judge them; the parser's verdict is the
        # decoding verdict itself, and nothing is accepted.
        assert verdict(outcome) == ("invalid", tuple(i.code for i in value.issues)), name
        return
    schema_ok = schema_errors("mailroom.response/v1", value) == []
    if not isinstance(value, dict):
        # A top-level array, null, number or string: the schema judges it too.
        assert not schema_ok and verdict(outcome) == ("invalid", ("not_an_object",)), name
        return
    if verdict(outcome) == ("invalid", ("chunk_too_long",)):
        actions = value["actions"]
        assert isinstance(actions, list) and schema_ok == (len(actions) <= 64), name
    elif verdict(outcome) == ("protocol_error", ("request_id_mismatch",)):
        assert schema_ok, name
    else:
        assert schema_ok == isinstance(outcome, Accepted), name
