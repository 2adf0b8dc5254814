"""The frozen, strict and bounded response parser.

Every outcome is a typed value: `Accepted`, `Invalid` (a confirmed-invalid response,
with reason codes) or `ProtocolError` (transport uncertainty: always terminal).
Nothing here raises for any byte string an actor can write.

The reason codes are public: feedback issues carry them and actors rely on them.
Never rename one; add new ones.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, TypeGuard

from .action_dimension import ACTION_DIMENSION
from .protocol import PROTOCOL_V1
from .schemas import schema_errors

MAX_RESPONSE_BYTES = 64 * 1024
MAX_DEPTH = 8
MAX_NOTE_CHARS = 280
RESPONSE_SCHEMA = PROTOCOL_V1.response_schema
REQUEST_ID = re.compile(r"[0-9a-f]{32}")


class InvalidReason(StrEnum):
    """A confirmed-invalid response: rejected whole, recoverable under `feedback`."""

    EMPTY_FILE = "empty_file"
    TOO_LARGE = "too_large"
    NOT_UTF8 = "invalid_encoding"  # no digits: codes must fit the result schema's pattern
    BYTE_ORDER_MARK = "byte_order_mark"
    MALFORMED_JSON = "malformed_json"
    NON_FINITE_LITERAL = "non_finite_literal"
    DUPLICATE_KEY = "duplicate_key"
    TOO_DEEP = "too_deep"
    UNPAIRED_SURROGATE = "unpaired_surrogate"
    NOT_AN_OBJECT = "not_an_object"
    WRONG_SCHEMA_VERSION = "wrong_schema_version"
    MISSING_FIELD = "missing_field"
    UNKNOWN_FIELD = "unknown_field"
    BAD_DECISION = "bad_decision"
    ACTIONS_NOT_ALLOWED = "actions_not_allowed"
    BAD_ACTIONS = "bad_actions"
    EMPTY_CHUNK = "empty_chunk"
    CHUNK_TOO_LONG = "chunk_too_long"
    WRONG_VECTOR_LENGTH = "wrong_vector_length"
    NON_NUMERIC_VALUE = "non_numeric_value"
    NON_FINITE_VALUE = "non_finite_value"
    OUT_OF_BOUNDS = "out_of_bounds"
    BAD_NOTE = "bad_note"
    BAD_REQUEST_ID = "bad_request_id"
    SCHEMA_INVALID = "schema_invalid"


class ProtocolReason(StrEnum):
    """Transport or native uncertainty: terminal in every handling mode."""

    REQUEST_ID_MISMATCH = "request_id_mismatch"
    SYMLINK = "symlink"
    NOT_REGULAR_FILE = "not_regular_file"
    HARD_LINK = "hard_link"
    UNREADABLE = "unreadable"
    DUPLICATE_RESPONSE = "duplicate_response"
    UNEXPECTED_RESPONSE = "unexpected_response"
    WRONG_FILE_NAME = "wrong_file_name"
    ENDPOINT_TAMPERED = "endpoint_tampered"


@dataclass(frozen=True)
class Issue:
    code: str
    message: str


@dataclass(frozen=True)
class Accepted:
    decision: Literal["act", "stop"]
    actions: tuple[tuple[float, ...], ...]
    note: str | None = None
    kind: Literal["accepted"] = "accepted"


@dataclass(frozen=True)
class Invalid:
    issues: tuple[Issue, ...]
    kind: Literal["invalid"] = "invalid"

    @property
    def reason(self) -> str:
        return self.issues[0].code


@dataclass(frozen=True)
class ProtocolError:
    reason: ProtocolReason
    message: str
    kind: Literal["protocol_error"] = "protocol_error"


ParseOutcome = Accepted | Invalid | ProtocolError


@dataclass(frozen=True)
class ActionLimits:
    """The bounds a decision must meet; the validator never clips or repairs.

    The defaults are protocol v1's; a v2 response is checked against the `action_spec`
    its observation published (`dimension`, `low`, `high`) and its own schema."""

    max_chunk: int
    low: float = -1.0
    high: float = 1.0
    dimension: int = ACTION_DIMENSION
    response_schema: str = RESPONSE_SCHEMA


class _DuplicateKey(ValueError):
    pass


class _NonFinite(ValueError):
    pass


def _pairs_without_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _reject_constant(name: str) -> object:
    raise _NonFinite(name)


def _strings(value: object) -> list[str]:
    """Every key and string value of a decoded document."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            found.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _has_unpaired_surrogate(value: object) -> bool:
    # A `\ud800` escape decodes to a code point that no UTF-8 text can hold.
    for text in _strings(value):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
    return False


def _invalid(code: InvalidReason, message: str) -> Invalid:
    return Invalid((Issue(code.value, message),))


# The characters that can change bracket depth or string state; the rest are skipped.
_STRUCTURAL = re.compile(r'[\[\]{}"\\]')


def _max_nesting_of_text(text: str) -> int:
    """Bracket depth of raw text, so a depth bomb is refused before json recursion.

    Brackets inside strings do not count; a backslash in a string escapes the very next
    character. Only the structural characters are visited.
    """
    depth = deepest = 0
    in_string = False
    escaped_at = -1  # the index of the character a backslash escapes
    for match in _STRUCTURAL.finditer(text):
        i = match.start()
        ch = text[i]
        if in_string:
            if i == escaped_at:
                continue
            if ch == "\\":
                escaped_at = i + 1
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


def decode_document(data: bytes) -> object | Invalid:
    """Bytes -> JSON value under every bound, or a typed `Invalid`.

    The checks run in a fixed order and the first failing one decides, so every byte
    string has exactly one decoding verdict.
    """
    if len(data) == 0:
        return _invalid(InvalidReason.EMPTY_FILE, "the response file is empty")
    if len(data) > MAX_RESPONSE_BYTES:
        return _invalid(InvalidReason.TOO_LARGE, f"the response exceeds {MAX_RESPONSE_BYTES} bytes")
    if data.startswith(b"\xef\xbb\xbf"):
        return _invalid(InvalidReason.BYTE_ORDER_MARK, "UTF-8 without a byte-order mark only")
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return _invalid(InvalidReason.NOT_UTF8, "the response is not valid UTF-8")
    if _max_nesting_of_text(text) > MAX_DEPTH:
        return _invalid(InvalidReason.TOO_DEEP, f"nesting deeper than {MAX_DEPTH} levels")
    try:
        value: object = json.loads(
            text,
            object_pairs_hook=_pairs_without_duplicates,
            parse_constant=_reject_constant,
        )
    except _DuplicateKey as exc:
        return _invalid(InvalidReason.DUPLICATE_KEY, f"duplicate key {str(exc)[:40]!r}")
    except _NonFinite as exc:
        return _invalid(InvalidReason.NON_FINITE_LITERAL, f"{exc} is not valid JSON")
    except (ValueError, RecursionError):
        return _invalid(InvalidReason.MALFORMED_JSON, "the response is not one JSON document")
    # The text's bracket depth, checked above, is the decoded value's container depth.
    # A lone surrogate can only come from a `\\u` escape: strict UTF-8 holds none.
    if "\\u" in text and _has_unpaired_surrogate(value):
        return _invalid(
            InvalidReason.UNPAIRED_SURROGATE, "a string holds an unpaired UTF-16 surrogate escape"
        )
    return value


def is_request_id(value: object) -> TypeGuard[str]:
    """A well-formed request id: 32 lowercase hexadecimal digits."""
    return isinstance(value, str) and REQUEST_ID.fullmatch(value) is not None


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _value_issue(value: object, where: str, limits: ActionLimits) -> Issue | None:
    if not _is_number(value):
        return Issue(InvalidReason.NON_NUMERIC_VALUE, f"{where} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        return Issue(InvalidReason.NON_FINITE_VALUE, f"{where} is not finite")
    # Compared as given: a huge integer is out of bounds, never a float overflow.
    if not limits.low <= value <= limits.high:
        return Issue(
            InvalidReason.OUT_OF_BOUNDS, f"{where} is outside [{limits.low:g}, {limits.high:g}]"
        )
    return None


def validate_actions(actions: object, limits: ActionLimits) -> list[Issue]:
    """The one action validator, shared by the mailbox and in-process policies."""
    if not isinstance(actions, list):
        return [Issue(InvalidReason.BAD_ACTIONS, "'actions' must be a list of vectors")]
    if len(actions) == 0:
        return [Issue(InvalidReason.EMPTY_CHUNK, "'actions' must hold at least one vector")]
    issues: list[Issue] = []
    if len(actions) > limits.max_chunk:
        issues.append(
            Issue(
                InvalidReason.CHUNK_TOO_LONG,
                f"{len(actions)} vectors; at most {limits.max_chunk} are allowed",
            )
        )
    for i, vector in enumerate(actions):
        if not isinstance(vector, list):
            issues.append(Issue(InvalidReason.BAD_ACTIONS, f"actions[{i}] is not a list"))
            continue
        if len(vector) != limits.dimension:
            issues.append(
                Issue(
                    InvalidReason.WRONG_VECTOR_LENGTH,
                    f"actions[{i}] has {len(vector)} numbers; exactly {limits.dimension} needed",
                )
            )
        for j, value in enumerate(vector):
            issue = _value_issue(value, f"actions[{i}][{j}]", limits)
            if issue is not None:
                issues.append(issue)
    return issues


_REQUIRED = ("schema", "request_id", "decision")
_ALLOWED = frozenset((*_REQUIRED, "actions", "note"))


def _structure_issues(doc: dict[str, object], limits: ActionLimits) -> list[Issue]:
    """Every problem of a decoded response, in one fixed order of checks."""
    issues: list[Issue] = []
    missing = [k for k in _REQUIRED if k not in doc]
    if missing:
        issues.append(Issue(InvalidReason.MISSING_FIELD, f"missing field(s): {', '.join(missing)}"))
    extra = sorted(k for k in doc if k not in _ALLOWED)
    if extra:
        shown = ", ".join(repr(k[:40]) for k in extra[:5])
        issues.append(Issue(InvalidReason.UNKNOWN_FIELD, f"unknown field(s): {shown}"))
    if "schema" in doc and doc["schema"] != limits.response_schema:
        issues.append(
            Issue(
                InvalidReason.WRONG_SCHEMA_VERSION,
                f"'schema' must be {limits.response_schema!r}",
            )
        )
    decision = doc.get("decision")
    if "decision" in doc and decision not in ("act", "stop"):
        issues.append(Issue(InvalidReason.BAD_DECISION, "'decision' must be 'act' or 'stop'"))
    if decision == "act":
        if "actions" not in doc:
            issues.append(Issue(InvalidReason.MISSING_FIELD, "decision 'act' requires 'actions'"))
        else:
            issues.extend(validate_actions(doc["actions"], limits))
    elif decision == "stop" and "actions" in doc:
        issues.append(
            Issue(InvalidReason.ACTIONS_NOT_ALLOWED, "decision 'stop' must not carry 'actions'")
        )
    note = doc.get("note")
    if "note" in doc and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS):
        issues.append(
            Issue(InvalidReason.BAD_NOTE, f"'note' must be a string of <= {MAX_NOTE_CHARS} chars")
        )
    if "request_id" in doc and not is_request_id(doc["request_id"]):
        issues.append(
            Issue(
                InvalidReason.BAD_REQUEST_ID,
                "'request_id' must be the observation's 32-hex-digit request_id",
            )
        )
    return issues


def parse_response(data: bytes, *, expected_request_id: str, limits: ActionLimits) -> ParseOutcome:
    """Judge one claimed response. Pure: bytes in, typed outcome out.

    A well-formed request id that is not the awaited one answers some other
    observation (stale or foreign): that is transport uncertainty, so it is terminal
    whatever else is wrong with the document. A malformed id is an ordinary issue.
    """
    value = decode_document(data)
    if isinstance(value, Invalid):
        return value
    if not isinstance(value, dict):
        return _invalid(InvalidReason.NOT_AN_OBJECT, "the response must be a JSON object")
    request_id = value.get("request_id")
    if is_request_id(request_id) and request_id != expected_request_id:
        return ProtocolError(
            ProtocolReason.REQUEST_ID_MISMATCH,
            "the request_id does not match the observation this file answers",
        )
    issues = _structure_issues(value, limits)
    if not issues:
        # Belt and braces: the frozen schema must agree with the hand-written checks.
        errors = schema_errors(limits.response_schema, value)
        if errors:
            issues = [Issue(InvalidReason.SCHEMA_INVALID, errors[0][:200])]
    if issues:
        return Invalid(tuple(issues))
    raw_actions = value.get("actions")
    actions: tuple[tuple[float, ...], ...] = ()
    if isinstance(raw_actions, list):
        actions = tuple(tuple(float(x) for x in vector) for vector in raw_actions)
    note = value.get("note")
    decision = value["decision"]
    assert decision in ("act", "stop")
    return Accepted(
        decision=decision, actions=actions, note=note if isinstance(note, str) else None
    )


def issue_codes(issues: Sequence[Issue]) -> list[str]:
    return [i.code for i in issues]
