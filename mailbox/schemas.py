"""Frozen JSON Schemas (Draft 2020-12) loaded from package data, resolved locally only."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource

SCHEMA_PACKAGE = "mailroom.schemas"


def _no_network(uri: str) -> Resource[Any]:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


def schema_file_name(kind: str) -> str:
    """`mailroom.response/v1` -> `mailroom.response.v1.json`."""
    return kind.replace("/", ".") + ".json"


@cache
def _all_schemas() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for entry in resources.files(SCHEMA_PACKAGE).iterdir():
        if entry.name.endswith(".json"):
            found[entry.name] = json.loads(entry.read_text(encoding="utf-8"))
    return found


@cache
def registry() -> Registry[Any]:
    """A registry of every frozen schema, keyed by `$id`; unknown URIs never hit the network."""
    reg: Registry[Any] = Registry(retrieve=_no_network)  # type: ignore[call-arg]
    for schema in _all_schemas().values():
        reg = reg.with_resource(schema["$id"], Resource.from_contents(schema))
    return reg


def load_schema(kind: str) -> dict[str, Any]:
    return _all_schemas()[schema_file_name(kind)]


@cache
def validator(kind: str) -> Draft202012Validator:
    schema = load_schema(kind)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(
        schema,
        registry=registry(),
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def schema_errors(kind: str, document: object) -> list[str]:
    """Every validation error as `path: message`, in a stable order."""
    errors = sorted(validator(kind).iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors]
