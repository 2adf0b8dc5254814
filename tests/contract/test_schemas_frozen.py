"""Frozen schemas stay frozen: pinned bytes, valid Draft 2020-12, local resolution only.

Changing a frozen schema fails here on purpose. A new version is a new file
(`mailroom.<kind>.v<N+1>.json` with its own `$id`), pinned below when it freezes.
"""

from __future__ import annotations

import hashlib
import json
import socket
import urllib.request
from typing import Any

import pytest
from conftest import REPO
from jsonschema import Draft202012Validator
from mailroom.mailbox.schemas import (
    local_registry,
    make_validator,
    registry,
    schema_errors,
    schema_files,
)
from referencing.exceptions import Unresolvable

SCHEMAS = REPO / "schemas"
FROZEN = {
    "mailroom.audit.v1.json": ("fe7e119ead05176ecf4894ad41a72ce597811ff6dc6b03e87032d17463ac8bd7"),
    "mailroom.audit.v2.json": ("069c01e09731a11a3e50f86d2fe720ed88d418762194e04fbaafda8afe19b6d8"),
    "mailroom.audit.v3.json": ("5e3b2ed794c84374cebd5f0008eb1e428219bb5a04a9a7dbc03b1cac6e8e91a6"),
    "mailroom.closed.v1.json": ("198ddf64e8f35408c0d15dae11aa5fc0c354414dd58bba270f72404278737073"),
    "mailroom.diagnostics.v1.json": (
        "8d12b8c381eebbfc6924148b49c03803d0280789db4ca5c4c194978d36659130"
    ),
    "mailroom.episode_result.v1.json": (
        "38ac93dfb765e96e2e1cd0a698ea09003e813c5ecc5ed68ebe75ca09b6f8cb78"
    ),
    "mailroom.episode_result.v2.json": (
        "946b50118201bdbd199571088748d9aa693f64c12c982360b0f79bb3d4144832"
    ),
    "mailroom.episode_result.v3.json": (
        "13e9b2912a14b7d7b0303785b4120f2c909cd0755076738f4bb88fe5bbe15440"
    ),
    "mailroom.episode_result.v4.json": (
        "000a09e55d1d77dd279384a5e3742aa683c3b8c973eb1a9d4115447cf19303d0"
    ),
    "mailroom.episode_result.v5.json": (
        "281c2ea76c30e4a8f43af09f578e64b618b07019796ef859e4e78e491e161451"
    ),
    "mailroom.episode_result.v6.json": (
        "35bf0b1516208c3350d4410e3530206df02e939c10300862c1d956cdc39c6eaf"
    ),
    "mailroom.episode_result.v7.json": (
        "f3d5525586b38810fb957a65b279db5032b4c79cac6d484ca336d35b6e2bbe4f"
    ),
    "mailroom.episode_result.v8.json": (
        "49df33e2d9378085703cf36c5b8a5f2649aa1dc6c3b695aff275922601f50dc3"
    ),
    "mailroom.observation.v1.json": (
        "5df1312c617777b59371d742ca883d8a2bde8d2585f64d9420dbbea4d2fb6a43"
    ),
    "mailroom.observation.v2.json": (
        "6854eacd8d818f2a48159c9b245b765626d64e8f7cea19f41d2fcb9a71cfdd6d"
    ),
    "mailroom.plan.v1.json": ("66ca6e748091a8771765913e312ddb47e2e12a8372e3fbaecb2735935b4d2d36"),
    "mailroom.plan.v2.json": ("d8b216339e4ae587d10ca43eddd86c00762bc68716aa5fbf22114dd3d02ae74b"),
    "mailroom.plan.v3.json": ("415defead48607adb9a537b22fe258d30f38be0e3021b92a90d95eb01b764ab0"),
    "mailroom.response.v1.json": (
        "9d177f737ce99a05cdc6868569e8ae55f908822b38717befcbd1070f0bdd57cb"
    ),
    "mailroom.response.v2.json": (
        "a8efdb46d7f070ae748528084f79576ac102836521aa70899fc840108ea233c4"
    ),
    "mailroom.run_manifest.v1.json": (
        "062083eb955f7a95843943d14ec03b1add98cbbefd51be259e543a8e82412da2"
    ),
    "mailroom.run_manifest.v2.json": (
        "bf5cbe685cd5db388d76d3c8401b54ca92c93f2b6d6c58696b4c7bf52c2bba69"
    ),
    "mailroom.run_manifest.v3.json": (
        "a33169c9e83195183cac5c2aad58350a21744e313e189408e3e748967a3e8de2"
    ),
    "mailroom.run_manifest.v4.json": (
        "1ed21631e278d354a9c2bc6877c9a6d6cc23d7b9462704f8f0569e934920e9e5"
    ),
    "mailroom.run_manifest.v5.json": (
        "b2ab16fd0f5cffbe40b40621dbc0fb0d1fa8fdf83e377af9117e46bafa27e626"
    ),
    "mailroom.run_manifest.v6.json": (
        "86865e369ae06becb691f49c73a786db27b8c6808cecec5f2537ae7ca8690179"
    ),
    "mailroom.run_manifest.v7.json": (
        "8c9761bcc8b951fc315ad35108063fc49c2013f23fce55d99ee48831876f5105"
    ),
    "mailroom.run_manifest.v8.json": (
        "7f4429e0facef9ea8601d7678fd2971df345e32d794b6d5e0254cd735c760d17"
    ),
}
ALL = sorted(p.name for p in SCHEMAS.glob("*.json"))


def test_every_schema_file_is_pinned() -> None:
    assert sorted(FROZEN) == ALL, "pin a new schema version here when it freezes"


@pytest.mark.parametrize("name", sorted(FROZEN))
def test_a_frozen_schema_never_changes(name: str) -> None:
    digest = hashlib.sha256((SCHEMAS / name).read_bytes()).hexdigest()
    assert digest == FROZEN[name], (
        f"{name} is frozen: publish a new version as a new file instead of editing it"
    )


def test_the_installed_package_ships_the_repository_schemas() -> None:
    shipped = schema_files()
    assert sorted(shipped) == ALL
    for name in ALL:
        assert shipped[name] == json.loads((SCHEMAS / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", ALL)
def test_every_schema_is_valid_draft_2020_12_with_a_stable_id(name: str) -> None:
    schema: dict[str, Any] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    kind = name.removesuffix(".json")
    kind = kind[: kind.rindex(".")] + "/" + kind[kind.rindex(".") + 1 :]  # a.b.v1 -> a.b/v1
    assert schema["$id"] == f"https://mailroom.invalid/schemas/{kind}"
    assert schema["title"] == kind
    assert schema["properties"]["schema"] == {"const": kind}
    assert "schema" in schema["required"]


def test_ids_are_unique_and_all_in_the_local_registry() -> None:
    ids = [s["$id"] for s in schema_files().values()]
    assert len(ids) == len(set(ids))
    for uri in ids:
        assert registry().get_or_retrieve(uri).value.contents["$id"] == uri


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("schema validation tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)


def test_an_unknown_remote_ref_fails_without_the_network(no_network: None) -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://mailroom.invalid/schemas/test.remote/v1",
        "$ref": "https://example.com/schemas/anything.json",
    }
    with pytest.raises(Unresolvable):
        make_validator(schema, local_registry([schema])).validate({})
    with pytest.raises(Unresolvable):
        make_validator(schema).validate({})


def test_refs_between_frozen_schemas_resolve_locally(no_network: None) -> None:
    by_ref = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": "https://mailroom.invalid/schemas/mailroom.response/v1",
    }
    validator = make_validator(by_ref)
    stop = {"schema": "mailroom.response/v1", "request_id": "0" * 32, "decision": "stop"}
    assert list(validator.iter_errors(stop)) == []
    assert list(validator.iter_errors({**stop, "decision": "jump"})) != []


def test_format_checking_is_on(no_network: None) -> None:
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "format": "date-time"}
    validator = make_validator(schema, local_registry([]))
    assert list(validator.iter_errors("2026-09-07T12:00:00Z")) == []
    assert list(validator.iter_errors("yesterday")) != []


def test_patterns_anchor_at_the_very_end_and_integers_are_integer_literals() -> None:
    stop = {"schema": "mailroom.response/v1", "request_id": "0" * 32, "decision": "stop"}
    assert schema_errors("mailroom.response/v1", stop) == []
    assert schema_errors("mailroom.response/v1", {**stop, "request_id": "0" * 32 + "\n"}) != []
    closed = {"schema": "mailroom.closed/v1", "last_sequence": 3}
    assert schema_errors("mailroom.closed/v1", closed) == []
    assert schema_errors("mailroom.closed/v1", {**closed, "last_sequence": 3.0}) != []
    assert schema_errors("mailroom.closed/v1", {**closed, "last_sequence": True}) != []
