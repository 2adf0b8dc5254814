"""Documents changed one way at a time, for the schema and upgrade tests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

Doc = dict[str, Any]
Mutation = Callable[[Doc], None]
DELETE = object()


def set_at(path: str, value: object) -> Mutation:
    """Set a dotted path ('a.b.0'); a value of DELETE removes the key."""

    def mutate(doc: Doc) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is DELETE:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def all_of(*mutations: Mutation) -> Mutation:
    """The mutations one after another."""

    def mutate(doc: Doc) -> None:
        for one in mutations:
            one(doc)

    return mutate


def moved(path: str, delta: float) -> Mutation:
    """Add `delta` to the number at a dotted path."""

    def mutate(doc: Doc) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[last] += delta

    return mutate


def mutated(base: Doc, mutations: dict[str, Mutation]) -> list[tuple[str, Doc]]:
    """Each mutation applied to its own copy of `base`, with its name."""
    out = []
    for name, mutate in mutations.items():
        doc = copy.deepcopy(base)
        mutate(doc)
        out.append((name, doc))
    return out
