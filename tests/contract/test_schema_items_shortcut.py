"""The `items` shortcut of the project's validator changes no verdict and no error.

Every document below is judged by the project's validator and by the same validator with
jsonschema's stock `items` keyword; both must give the same errors, message and path.
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any, cast

import pytest
from jsonschema import Draft202012Validator, validators
from jsonschema.protocols import Validator
from mailroom.mailbox.schemas import (
    MailroomValidator,
    load_schema,
    make_validator,
    plain_check,
    registry,
    schema_files,
)
from schema_documents import EXAMPLES, KINDS

StockItemsValidator: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
    MailroomValidator, validators={"items": Draft202012Validator.VALIDATORS["items"]}
)

LEAVES: list[object] = [
    0,
    1,
    -1,
    2,
    0.0,
    -0.0,
    0.5,
    -1.0,
    1.0,
    1.0000001,
    -1.0000001,
    10**400,
    -(10**400),
    1e308,
    math.inf,
    -math.inf,
    math.nan,
    True,
    False,
    None,
    "0.5",
    "",
    [],
    {},
    [0.5],
]
ITEM_SCHEMAS: list[object] = [
    {"type": "number", "minimum": -1, "maximum": 1},
    {"type": "number", "minimum": -0.5},
    {"type": "number", "description": "any number"},
    {"type": "integer", "minimum": 0, "maximum": 3},
    {"type": "string"},
    {"type": "array", "minItems": 7, "maxItems": 7, "items": {"type": "number"}},
    {
        "type": "array",
        "minItems": 1,
        "maxItems": 3,
        "items": {"type": "number", "minimum": -1, "maximum": 1},
    },
    {"type": "array"},
    # not plain: the stock keyword does everything
    {"type": "number", "exclusiveMaximum": 1},
    {"type": ["number", "null"]},
    {"enum": [0, 1]},
    {"type": "string", "maxLength": 2},
    {"$ref": "#/$defs/x"},
    True,
    False,
]


def _stock(schema: dict[str, Any]) -> Validator:
    return StockItemsValidator(
        schema, registry=registry(), format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def _errors(validator: Validator, instance: object) -> list[tuple[str, str]]:
    found = validator.iter_errors(cast(Any, instance))
    return sorted((e.json_path, e.message) for e in found)


def _random_instance(rng: random.Random, depth: int = 0) -> object:
    if depth < 2 and rng.random() < 0.5:
        length = rng.choice([0, 1, 2, 3, 6, 7, 8])
        return [_random_instance(rng, depth + 1) for _ in range(length)]
    return rng.choice(LEAVES)


def test_a_plain_check_never_accepts_what_the_schema_refuses() -> None:
    rng = random.Random(20261129)
    instances = [*LEAVES, *(_random_instance(rng) for _ in range(3000))]
    checked = 0
    for item_schema in ITEM_SCHEMAS:
        check = plain_check(item_schema)
        if check is None:
            continue
        stock = _stock({"$defs": {"x": {}}, **cast(dict[str, Any], item_schema)})
        for instance in instances:
            if check(instance):
                checked += 1
                assert stock.is_valid(cast(Any, instance)), (item_schema, instance)
    assert checked > 1000


def test_only_plain_schemas_have_a_check() -> None:
    plain = [s for s in ITEM_SCHEMAS if plain_check(s) is not None]
    assert len(plain) == 8
    vector = load_schema("mailroom.response/v1")["properties"]["actions"]["items"]
    assert plain_check(vector) is not None


@pytest.mark.parametrize("item_schema", ITEM_SCHEMAS, ids=repr)
def test_arrays_get_the_same_errors_with_or_without_the_shortcut(item_schema: object) -> None:
    rng = random.Random(7)
    schema = {"$defs": {"x": {"type": "integer"}}, "type": "array", "items": item_schema}
    ours = make_validator(schema)
    stock = _stock(schema)
    instances: list[object] = [[leaf] * n for leaf in LEAVES for n in (0, 1, 3)]
    instances += [_random_instance(rng) for _ in range(1500)]
    instances += [[[0.1] * 7] * 5, [[0.1] * 7] * 4 + [[0.1] * 6], [[0.1] * 6 + [math.nan]]]
    for instance in instances:
        assert _errors(ours, instance) == _errors(stock, instance), instance


def test_prefix_items_are_left_to_the_stock_keyword() -> None:
    schema = {
        "type": "array",
        "prefixItems": [{"type": "string"}],
        "items": {"type": "number", "minimum": 0},
    }
    ours, stock = make_validator(schema), _stock(schema)
    for instance in (["a", 1], [1, 1], ["a", -1], [0.5], ["a"], []):
        assert _errors(ours, instance) == _errors(stock, instance), instance


def _mutations(rng: random.Random, document: object) -> object:
    """`document` with a few values somewhere in it replaced by arbitrary ones."""
    mutated = copy.deepcopy(document)
    for _ in range(rng.randint(1, 3)):
        node: Any = mutated
        while True:
            if isinstance(node, dict) and node:
                key = rng.choice(sorted(node))
            elif isinstance(node, list) and node:
                key = rng.randrange(len(node))
            else:
                break
            if rng.random() < 0.4 or not isinstance(node[key], dict | list):
                node[key] = _random_instance(rng)
                break
            node = node[key]
    return mutated


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_documents_get_the_same_errors_with_or_without_the_shortcut(kind: str) -> None:
    schema_kind, _ = KINDS[kind]
    schema = load_schema(schema_kind)
    ours, stock = make_validator(schema), _stock(schema)
    rng = random.Random(kind)
    examples = [doc for k, _, doc, _ in EXAMPLES if k == kind]
    documents = [*examples, *(_mutations(rng, rng.choice(examples)) for _ in range(400))]
    for document in documents:
        assert _errors(ours, document) == _errors(stock, document), document


def test_every_shipped_schema_is_itself_valid_for_both() -> None:
    for name, schema in schema_files().items():
        assert _errors(make_validator(schema), {}) == _errors(_stock(schema), {}), name
