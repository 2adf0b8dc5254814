"""Each frozen schema and its pydantic mirror give the same verdict on the same document.

The schema judges the decoded JSON value; the model judges the JSON text, as it would
arrive (`from_json`: strict, wire field names). Decoding rules that come before either
(UTF-8, no NaN literals, no duplicate keys, depth) are the parser's, tested elsewhere.
"""

from __future__ import annotations

import json

import pytest
from mailroom.mailbox.messages import from_json
from mailroom.mailbox.schemas import schema_errors
from pydantic import BaseModel, ValidationError
from schema_documents import EXAMPLES, KINDS, RESPONSE_INVALID


def _verdicts(kind: str, model: type[BaseModel], doc: object) -> tuple[bool, bool]:
    schema_ok = schema_errors(kind, doc) == []
    try:
        from_json(model, json.dumps(doc))
        model_ok = True
    except ValidationError:
        model_ok = False
    return schema_ok, model_ok


@pytest.mark.parametrize(
    ("kind", "name", "doc", "expected"),
    EXAMPLES,
    ids=[f"{k}-{'valid' if ok else 'invalid'}-{n}" for k, n, _, ok in EXAMPLES],
)
def test_schema_and_model_agree(kind: str, name: str, doc: object, expected: bool) -> None:
    schema_kind, model = KINDS[kind]
    assert _verdicts(schema_kind, model, doc) == (expected, expected)


def test_there_are_examples_of_every_kind_both_ways() -> None:
    for kind in KINDS:
        verdicts = {ok for k, _, _, ok in EXAMPLES if k == kind}
        assert verdicts == {True, False}, kind
    assert len(RESPONSE_INVALID) >= 30
