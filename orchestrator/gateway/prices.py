"""Cost from a declared price table: what the metered tokens cost at the prices a run
names, or why that cannot be said.

The table is data: `prices.json` ships with the package (its `source` says where each
figure comes from and when it was read); a user's own file replaces it entirely, never
merged. `PriceTable.sha256` is the hash of the file's bytes as read, which the manifest
records, so a cost can always be traced to the prices it was computed from.

The providers count cached tokens differently, and the cost follows each:
- Anthropic: `input_tokens` exclude the cache. Cache reads, cache writes for five
  minutes and cache writes for an hour are billed apart, each at its own price.
- OpenAI: `input_tokens` include `cached_tokens`. The uncached rest is billed at the
  input price, the cached part at the cache-read price; no cache writes are reported.
A model may declare a long-context tier: when one request's prompt (Anthropic: input,
cache reads and writes together; OpenAI: input) is above its threshold, every token of
that request is billed at the tier's prices.

A cost is never guessed. It is None, with the reason, for a model the table does not
price (names match exactly, model or alias, never by prefix), no model named, input or
output tokens not reported, a service tier other than the standard one the prices are
for, server tools the provider ran (their fees are not in the table), and tokens of a
kind the model has no price for. Cache counts a provider did not report count as none:
providers leave them out when nothing was cached (OpenAI never reports cache writes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from mailroom.orchestrator.gateway.metering import Metered
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

PRICE_TABLE_SCHEMA: Literal["mailroom.price_table/v1"] = "mailroom.price_table/v1"
MAX_TABLE_BYTES = 1 << 20
SHIPPED_TABLE = "prices.json"
# The providers whose billing rules `PriceTable.cost` knows, by the names a table uses;
# the gateway's provider kinds map onto them.
PriceProvider = Literal["anthropic", "openai"]
BILLING: dict[str, PriceProvider] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai_responses": "openai",
}
# The tiers a table's prices are for, as each provider names the tier in its answer.
STANDARD_TIERS = frozenset({"standard", "default"})
PER_MILLION = 1_000_000

Price = Annotated[float, Field(ge=0, allow_inf_nan=False)]
ModelName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[!-~]+$")]


class PriceTableError(ValueError):
    """A price table that cannot be used: missing, unreadable, too large, not UTF-8, not
    JSON, or not a valid table."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class TierPrices(_Strict):
    """A long-context tier: above `above_prompt_tokens` prompt tokens, these prices."""

    above_prompt_tokens: Annotated[int, Field(ge=1)]
    input: Price
    output: Price
    cache_read: Price
    cache_write: Price | None = None
    cache_write_1h: Price | None = None


class ModelPrices(_Strict):
    """One model's prices in USD per million tokens; `cache_write` is the default
    (five-minute) cache write, `cache_write_1h` the hour-long one (Anthropic)."""

    provider: PriceProvider
    model: ModelName
    aliases: Annotated[list[ModelName], Field(max_length=32)] = []
    input: Price
    output: Price
    cache_read: Price
    cache_write: Price | None = None
    cache_write_1h: Price | None = None
    long_context: TierPrices | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.model, *self.aliases)


class PriceTableDocument(_Strict):
    """A price table file (`mailroom.price_table/v1`)."""

    schema_: Literal["mailroom.price_table/v1"] = Field(alias="schema")
    currency: Literal["USD"]
    unit: Literal["per million tokens"]
    source: Annotated[str, Field(min_length=1, max_length=4000)]
    retrieved: date
    models: Annotated[list[ModelPrices], Field(max_length=1000)]

    @model_validator(mode="after")
    def _each_name_once(self) -> PriceTableDocument:
        seen: set[str] = set()
        for prices in self.models:
            for name in prices.names:
                if name in seen:
                    raise ValueError(f"model {name!r} is listed twice (as a model or an alias)")
                seen.add(name)
        return self


@dataclass(frozen=True)
class Cost:
    """What one answer cost in USD, or None with the reason it cannot be said."""

    usd: float | None
    reason: str | None = None

    def __post_init__(self) -> None:
        if (self.usd is None) == (self.reason is None):
            raise ValueError("a cost has a figure or a reason, never both, never neither")


@dataclass(frozen=True)
class PriceTable:
    document: PriceTableDocument
    sha256: str  # of the file's bytes as read
    shipped: bool  # the package's own table, not a user's
    _index: dict[tuple[str, str], ModelPrices] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = {
            (prices.provider, name): prices
            for prices in self.document.models
            for name in prices.names
        }
        object.__setattr__(self, "_index", index)

    def prices(self, provider: str, model: str) -> ModelPrices | None:
        """The prices of `model` (its name or an alias) of `provider` (a table's name or
        a gateway's provider kind), or None."""
        billing = BILLING.get(provider)
        return None if billing is None else self._index.get((billing, model))

    def cost(
        self, provider: str, model: str | None, usage: Metered | Mapping[str, int | None]
    ) -> Cost:
        """What `usage` of `model` cost, by `provider`'s billing rules. `usage` is one
        answer's (the long-context tier, the service tier and the hour-long cache writes
        are per request), or counts named as `Metered` names them."""
        billing = BILLING.get(provider)
        if billing is None:
            return Cost(None, f"provider {_shown(provider)} is not in the price table")
        if model is None:
            return Cost(None, "the provider did not say which model answered")
        prices = self._index.get((billing, model))
        if prices is None:
            return Cost(
                None,
                f"model {_shown(model)} of provider {_shown(provider)} is not in the price table",
            )
        return _cost(billing, prices, usage if isinstance(usage, Metered) else _counts(usage))


def load_price_table(path: Path | None = None) -> PriceTable:
    """The price table at `path`, or the shipped one (None)."""
    if path is None:
        where = "the shipped price table"
        resource = resources.files(__name__.rpartition(".")[0]) / SHIPPED_TABLE
        data = resource.read_bytes()
    else:
        where = f"price table {path}"
        data = _read(path, where)
    return PriceTable(_document(data, where), hashlib.sha256(data).hexdigest(), path is None)


def _read(path: Path, where: str) -> bytes:
    try:
        if not path.is_file():
            raise PriceTableError(
                f"{where} is not a regular file" if path.exists() else f"{where} does not exist"
            )
        with path.open("rb") as handle:
            data = handle.read(MAX_TABLE_BYTES + 1)
    except OSError as error:
        raise PriceTableError(f"{where} cannot be read: {error.strerror or error}") from None
    if len(data) > MAX_TABLE_BYTES:
        raise PriceTableError(f"{where} is larger than {MAX_TABLE_BYTES} bytes")
    return data


def _document(data: bytes, where: str) -> PriceTableDocument:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PriceTableError(f"{where} is not UTF-8 (byte {error.start})") from None
    try:
        json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except (ValueError, RecursionError) as error:
        raise PriceTableError(f"{where} is not JSON: {error}") from None
    try:
        return PriceTableDocument.model_validate_json(text, strict=True)
    except ValidationError as error:
        problems = [
            f"{'.'.join(str(part) for part in problem['loc']) or 'the table'}: {problem['msg']}"
            for problem in error.errors(include_url=False, include_input=False)[:5]
        ]
        raise PriceTableError(f"{where} is invalid: {'; '.join(problems)}") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"key {key!r} appears twice in one object")
        seen.add(key)
    return dict(pairs)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _counts(usage: Mapping[str, int | None]) -> Metered:
    """Counts given by name, as the answer they add up to (a name not given: not said)."""
    return Metered(
        input_tokens=usage.get("input_tokens"),
        output_tokens=usage.get("output_tokens"),
        cache_read_tokens=usage.get("cache_read_tokens"),
        cache_write_tokens=usage.get("cache_write_tokens"),
        cache_write_1h_tokens=usage.get("cache_write_1h_tokens"),
        server_tool_uses=usage.get("server_tool_uses"),
        web_search_requests=usage.get("web_search_requests"),
    )


def _shown(name: str) -> str:
    return repr(name) if len(name) <= 100 else repr(name[:100]) + "..."


def _cost(billing: PriceProvider, prices: ModelPrices, usage: Metered) -> Cost:
    missing = [
        kind
        for kind, tokens in (("input", usage.input_tokens), ("output", usage.output_tokens))
        if tokens is None
    ]
    if usage.input_tokens is None or usage.output_tokens is None:
        return Cost(None, f"the provider did not report {' and '.join(missing)} tokens")
    if usage.service_tier is not None and usage.service_tier not in STANDARD_TIERS:
        return Cost(
            None,
            f"service tier {_shown(usage.service_tier)} is not priced: the table's prices "
            "are the standard tier's",
        )
    tools = max(usage.server_tool_uses or 0, usage.web_search_requests or 0)
    if tools:
        return Cost(
            None,
            f"{tools} server tool uses (web search and the like) are billed apart, at prices "
            "the table does not hold",
        )
    counts = (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.cache_write_1h_tokens,
    )
    if any(count is not None and count < 0 for count in counts):
        return Cost(None, "a token count is negative")
    read = usage.cache_read_tokens or 0
    written = usage.cache_write_tokens or 0
    written_1h = usage.cache_write_1h_tokens or 0
    if written_1h > written:
        return Cost(
            None,
            f"the cache written for an hour ({written_1h} tokens) is more than the whole "
            f"cache written ({written})",
        )
    if billing == "anthropic":
        prompt = usage.input_tokens + read + written
        uncached = usage.input_tokens
    else:
        if read > usage.input_tokens:
            return Cost(
                None,
                f"the cached input tokens ({read}) are more than the input tokens "
                f"({usage.input_tokens}) they are a part of",
            )
        prompt = usage.input_tokens
        uncached = usage.input_tokens - read
    tier = prices.long_context
    rates: ModelPrices | TierPrices = (
        tier if tier is not None and prompt > tier.above_prompt_tokens else prices
    )
    terms = (
        ("input", uncached, rates.input),
        ("output", usage.output_tokens, rates.output),
        ("cache read", read, rates.cache_read),
        ("cache write", written - written_1h, rates.cache_write),
        ("hour-long cache write", written_1h, rates.cache_write_1h),
    )
    total = Fraction(0)
    for kind, tokens, price in terms:
        if not tokens:
            continue
        if price is None:
            return Cost(None, f"the table has no {kind} price for model {_shown(prices.model)}")
        # Prices as the decimals the table wrote, so that a figure is exact to the cent.
        total += tokens * Fraction(repr(price))
    return Cost(float(total / PER_MILLION))
