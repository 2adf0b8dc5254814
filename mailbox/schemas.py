"""Frozen JSON Schemas (Draft 2020-12) loaded from package data, resolved locally only.

Two points where Python's defaults differ from JSON Schema's model, fixed here so the
validator and the pydantic mirrors in `messages.py` agree:

- `pattern` is an ECMA-262 regular expression, whose `$` matches only at the very end;
  Python's `$` also matches before a final newline.
- `integer` is a number written as an integer literal. JSON Schema would also accept
  `5.0`; mailroom never writes one, and the strict models refuse it.

One shortcut, which changes no verdict and no error: `items` first asks whether every
element plainly meets a plain item schema (a number, integer or string type with
numeric bounds, or an array of such with length bounds: a response's action vectors).
Only when that holds is the keyword done; anything else, and any element in doubt, goes
through the stock keyword, which gives every error as before. jsonschema's generic
descent costs ~10 us per element, most of a response's validation.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from functools import cache
from importlib import resources
from typing import Any, cast

from jsonschema import Draft202012Validator, TypeChecker, ValidationError, validators
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource
from referencing.jsonschema import DRAFT202012

SCHEMA_PACKAGE = "mailroom.schemas"


def _no_network(uri: str) -> Resource[Any]:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


def schema_file_name(kind: str) -> str:
    """`mailroom.response/v1` -> `mailroom.response.v1.json`."""
    return kind.replace("/", ".") + ".json"


def ecma_anchors(pattern: str) -> str:
    """Rewrite each unescaped `$` outside a character class as `\\Z`."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "$":
            ch = r"\Z"
        out.append(ch)
        i += 1
    return "".join(out)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(ecma_anchors(pattern))


def _pattern(
    validator: Validator, pattern: str, instance: object, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if isinstance(instance, str) and _compiled(pattern).search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _integer_literal(checker: TypeChecker, instance: object) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


Check = Callable[[object], bool]
_ANNOTATIONS = frozenset({"title", "description"})
_LEAF_CLASSES: dict[str, tuple[type, ...]] = {
    "number": (int, float),
    "integer": (int,),
    "string": (str,),
}


def _is_bound(value: object) -> bool:
    return value.__class__ in (int, float)


def _any(instance: object) -> bool:
    return True


def plain_check(schema: object) -> Check | None:
    """A predicate true only of instances `schema` accepts, or None if `schema` is not plain.

    Plain: annotations aside, a `number`/`integer` type with `minimum`/`maximum`, a
    bare `string` type, or an `array` type with `minItems`/`maxItems` and plain `items`.
    The predicate may refuse what the schema accepts (a NaN, a subclass of int or
    float); it never accepts what the schema refuses.
    """
    if not isinstance(schema, dict):
        return None
    keys = schema.keys() - _ANNOTATIONS
    kind = schema.get("type")
    if kind in ("number", "integer") and keys <= {"type", "minimum", "maximum"}:
        classes = _LEAF_CLASSES[kind]
        low, high = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
        if not (_is_bound(low) and _is_bound(high)):
            return None
        return lambda x: x.__class__ in classes and low <= x <= high
    if kind == "string" and keys == {"type"}:
        return lambda x: x.__class__ is str
    if kind == "array" and keys <= {"type", "minItems", "maxItems", "items"}:
        inner = plain_check(schema["items"]) if "items" in schema else _any
        shortest, longest = schema.get("minItems", 0), schema.get("maxItems", math.inf)
        if inner is None or not (_is_bound(shortest) and _is_bound(longest)):
            return None
        return lambda x: (
            x.__class__ is list and shortest <= len(x) <= longest and all(map(inner, x))
        )
    return None


# Item schemas live as long as the loaded schemas: each is compiled once, kept by id
# together with the schema itself (so the id is never reused while cached).
_PLAIN: dict[int, tuple[object, Check | None]] = {}


def _plain_check_of(schema: object) -> Check | None:
    cached = _PLAIN.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = (schema, plain_check(schema))
        _PLAIN[id(schema)] = cached
    return cached[1]


_STOCK_ITEMS = Draft202012Validator.VALIDATORS["items"]


def _items(
    validator: Validator, items: object, instance: object, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if isinstance(instance, list) and "prefixItems" not in schema:
        check = _plain_check_of(items)
        if check is not None and all(map(check, instance)):
            return
    yield from _STOCK_ITEMS(validator, items, instance, schema)


MailroomValidator: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    validators={"pattern": _pattern, "items": _items},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _integer_literal),
)


@cache
def _all_schemas() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for entry in resources.files(SCHEMA_PACKAGE).iterdir():
        if entry.name.endswith(".json"):
            found[entry.name] = json.loads(entry.read_text(encoding="utf-8"))
    return found


def schema_files() -> dict[str, dict[str, Any]]:
    """File name -> frozen schema, for every file shipped."""
    return dict(_all_schemas())


def local_registry(schemas: list[dict[str, Any]]) -> Registry[Any]:
    """A registry of `schemas` keyed by `$id`; any other URI fails, never hits the network."""
    reg: Registry[Any] = Registry(retrieve=_no_network)  # type: ignore[call-arg]
    return reg.with_resources((s["$id"], DRAFT202012.create_resource(s)) for s in schemas)


@cache
def registry() -> Registry[Any]:
    return local_registry(list(_all_schemas().values()))


def load_schema(kind: str) -> dict[str, Any]:
    return _all_schemas()[schema_file_name(kind)]


def make_validator(schema: dict[str, Any], reg: Registry[Any] | None = None) -> Validator:
    """The project's validator: local registry, format checking, the two fixes above."""
    Draft202012Validator.check_schema(schema)
    made: Validator = MailroomValidator(
        schema,
        registry=registry() if reg is None else reg,
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )
    return made


@cache
def validator(kind: str) -> Validator:
    return make_validator(load_schema(kind))


def _path_key(error: ValidationError) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in error.absolute_path)


def schema_errors(kind: str, document: object) -> list[str]:
    """Every validation error as `path: message`, in a stable order."""
    found = validator(kind).iter_errors(cast(Any, document))
    errors = sorted(found, key=lambda e: (_path_key(e), e.message))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors]
