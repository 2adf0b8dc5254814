"""Cost from a declared price table: each provider's billing rule with exact figures, the
shipped table, and every kind of table that must be refused."""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from mailroom.orchestrator.gateway.metering import Metered
from mailroom.orchestrator.gateway.prices import (
    MAX_TABLE_BYTES,
    Cost,
    PriceTable,
    PriceTableError,
    load_price_table,
)


def usd(cents_per_million: Fraction | int) -> float:
    """A figure as the table's decimal prices make it: exact, then rounded once."""
    return float(Fraction(cents_per_million) / 1_000_000)


@pytest.fixture(scope="module")
def shipped() -> PriceTable:
    return load_price_table()


def table_document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "schema": "mailroom.price_table/v1",
        "currency": "USD",
        "unit": "per million tokens",
        "source": "a test's own prices",
        "retrieved": "2026-12-01",
        "models": [
            {
                "provider": "anthropic",
                "model": "claude-test",
                "aliases": ["claude-test-20261201"],
                "input": 2,
                "output": 10.0,
                "cache_read": 0.2,
                "cache_write": 2.5,
            },
            {
                "provider": "openai",
                "model": "gpt-test",
                "input": 1.0,
                "output": 8.0,
                "cache_read": 0.1,
            },
        ],
    }
    document.update(changes)
    return document


def write_table(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(document))
    return path


# The shipped table


def test_the_shipped_table_loads_and_records_the_hash_of_its_bytes(shipped: PriceTable) -> None:
    data = (resources.files("mailroom.orchestrator.gateway") / "prices.json").read_bytes()
    assert shipped.sha256 == hashlib.sha256(data).hexdigest()
    assert shipped.shipped
    document = shipped.document
    assert document.currency == "USD" and document.unit == "per million tokens"
    assert "https://platform.claude.com/" in document.source
    assert "https://developers.openai.com/" in document.source
    for provider, model in (
        ("anthropic", "claude-opus-4-8"),
        ("anthropic", "claude-sonnet-4-5"),
        ("anthropic", "claude-haiku-4-5-20251001"),
        ("openai_responses", "gpt-5"),
        ("openai_responses", "gpt-5-codex"),
        ("openai_responses", "gpt-5-mini"),
    ):
        assert shipped.prices(provider, model) is not None, model


def test_shipped_prices_are_the_published_ones(shipped: PriceTable) -> None:
    sonnet = shipped.prices("anthropic", "claude-sonnet-4-5-20250929")
    assert sonnet is not None and sonnet.model == "claude-sonnet-4-5"
    assert (sonnet.input, sonnet.output, sonnet.cache_read) == (3.0, 15.0, 0.3)
    assert (sonnet.cache_write, sonnet.cache_write_1h) == (3.75, 6.0)
    codex = shipped.prices("openai", "gpt-5-codex")
    assert codex is not None
    assert (codex.input, codex.output, codex.cache_read, codex.cache_write) == (
        1.25,
        10.0,
        0.125,
        None,
    )


# Anthropic: input excludes the cache


def test_anthropic_bills_input_and_each_cache_apart(shipped: PriceTable) -> None:
    usage = Metered(
        model="claude-sonnet-4-5-20250929",
        input_tokens=1000,
        output_tokens=500,
        cache_read_tokens=2000,
        cache_write_tokens=3000,
        cache_write_1h_tokens=1000,
        service_tier="standard",
        complete=True,
    )
    # 1000 x 3 + 500 x 15 + 2000 x 0.30 + 2000 x 3.75 (five minutes) + 1000 x 6 (an hour)
    expected = usd(3000 + 7500 + 600 + 7500 + 6000)
    assert expected == 0.0246
    assert shipped.cost("anthropic", usage.model, usage) == Cost(expected)
    # The alias and the model are one entry.
    assert shipped.cost("anthropic", "claude-sonnet-4-5", usage) == Cost(expected)


def test_anthropic_cache_counts_not_reported_count_as_none(shipped: PriceTable) -> None:
    usage = Metered(input_tokens=10_000, output_tokens=2_000)
    # Opus 4.8: 10000 x 5 + 2000 x 25
    assert shipped.cost("anthropic", "claude-opus-4-8", usage) == Cost(usd(50_000 + 50_000))
    # Without the hour's share, every cache write is a five-minute one.
    written = Metered(input_tokens=0, output_tokens=0, cache_write_tokens=1_000_000)
    assert shipped.cost("anthropic", "claude-haiku-4-5", written) == Cost(1.25)


def test_anthropic_long_context_prices_the_whole_request(shipped: PriceTable) -> None:
    # The prompt is input + cache reads + cache writes: 150000 + 60000 > 200000.
    long = Metered(input_tokens=150_000, output_tokens=1_000, cache_read_tokens=60_000)
    expected = usd(150_000 * 6 + 1_000 * Fraction("22.5") + 60_000 * Fraction("0.6"))
    assert expected == 0.9585
    assert shipped.cost("anthropic", "claude-sonnet-4-5", long) == Cost(expected)
    # At the threshold exactly, the base prices.
    edge = Metered(input_tokens=140_000, output_tokens=1_000, cache_read_tokens=60_000)
    base = usd(140_000 * 3 + 1_000 * 15 + 60_000 * Fraction("0.3"))
    assert shipped.cost("anthropic", "claude-sonnet-4-5", edge) == Cost(base)
    # A model without a long-context tier keeps its prices.
    assert shipped.cost("anthropic", "claude-sonnet-4-6", long) == Cost(
        usd(150_000 * 3 + 1_000 * 15 + 60_000 * Fraction("0.3"))
    )


# OpenAI: input includes the cache


def test_openai_bills_the_cached_part_of_the_input_at_the_cache_price(shipped: PriceTable) -> None:
    usage = Metered(
        model="gpt-5-2025-08-07",
        input_tokens=10_000,
        output_tokens=1_000,
        cache_read_tokens=8_000,
        service_tier="default",
        complete=True,
    )
    # (10000 - 8000) x 1.25 + 8000 x 0.125 + 1000 x 10
    expected = usd(2_500 + 1_000 + 10_000)
    assert expected == 0.0135
    assert shipped.cost("openai_responses", usage.model, usage) == Cost(expected)
    assert shipped.cost("openai", "gpt-5", usage) == Cost(expected)


def test_the_same_counts_cost_differently_by_provider(tmp_path: Path) -> None:
    both = table_document(
        models=[
            {"provider": p, "model": f"{p}-m", "input": 1, "output": 0, "cache_read": 0.1}
            for p in ("anthropic", "openai")
        ]
    )
    table = load_price_table(write_table(tmp_path, both))
    usage = Metered(input_tokens=1_000_000, output_tokens=0, cache_read_tokens=400_000)
    # Anthropic: 1,000,000 uncached + 400,000 cached on top.
    assert table.cost("anthropic", "anthropic-m", usage) == Cost(1.04)
    # OpenAI: 600,000 uncached + 400,000 cached, within the 1,000,000.
    assert table.cost("openai_responses", "openai-m", usage) == Cost(0.64)


def test_openai_cached_tokens_past_the_input_are_refused(shipped: PriceTable) -> None:
    usage = Metered(input_tokens=100, output_tokens=1, cache_read_tokens=101)
    cost = shipped.cost("openai_responses", "gpt-5-mini", usage)
    assert cost.usd is None and cost.reason is not None and "cached input tokens" in cost.reason


# Never a guess


def test_a_model_the_table_does_not_price_has_no_cost(shipped: PriceTable) -> None:
    usage = Metered(input_tokens=1, output_tokens=1)
    assert shipped.cost("anthropic", "claude-sonnet-9", usage) == Cost(
        None, "model 'claude-sonnet-9' of provider 'anthropic' is not in the price table"
    )
    # Never by prefix or by another provider's name.
    assert shipped.cost("anthropic", "claude-sonnet-4-5-20991231", usage).usd is None
    assert shipped.cost("anthropic", "gpt-5", usage).usd is None
    assert shipped.cost("anthropic", None, usage) == Cost(
        None, "the provider did not say which model answered"
    )
    assert shipped.cost("google", "gemini", usage) == Cost(
        None, "provider 'google' is not in the price table"
    )
    long_name = shipped.cost("openai", "m" * 300, usage)
    assert long_name.reason is not None and len(long_name.reason) < 200


def test_input_or_output_not_reported_means_no_cost(shipped: PriceTable) -> None:
    assert shipped.cost("anthropic", "claude-opus-4-6", Metered(output_tokens=5)) == Cost(
        None, "the provider did not report input tokens"
    )
    assert shipped.cost("anthropic", "claude-opus-4-6", Metered()) == Cost(
        None, "the provider did not report input and output tokens"
    )


def test_what_the_table_does_not_price_is_refused(shipped: PriceTable, tmp_path: Path) -> None:
    base = Metered(input_tokens=100, output_tokens=10)
    for usage, words in (
        (Metered(input_tokens=100, output_tokens=10, service_tier="priority"), "service tier"),
        (Metered(input_tokens=100, output_tokens=10, service_tier="flex"), "service tier"),
        (Metered(input_tokens=100, output_tokens=10, server_tool_uses=2), "server tool"),
        (Metered(input_tokens=100, output_tokens=10, web_search_requests=1), "server tool"),
        (
            Metered(
                input_tokens=100, output_tokens=10, cache_write_tokens=5, cache_write_1h_tokens=6
            ),
            "an hour",
        ),
        (Metered(input_tokens=-1, output_tokens=10), "negative"),
    ):
        cost = shipped.cost("anthropic", "claude-sonnet-4-6", usage)
        assert cost.usd is None and cost.reason is not None and words in cost.reason, usage
    assert shipped.cost("anthropic", "claude-sonnet-4-6", base).usd is not None
    # Cache writes for a model with no cache-write price.
    openai = Metered(input_tokens=100, output_tokens=10, cache_write_tokens=50)
    assert shipped.cost("openai", "gpt-5", openai) == Cost(
        None, "the table has no cache write price for model 'gpt-5'"
    )
    # Hour-long writes for a model with no price for them.
    table = load_price_table(write_table(tmp_path, table_document()))
    hourly = Metered(input_tokens=1, output_tokens=1, cache_write_tokens=9, cache_write_1h_tokens=9)
    assert table.cost("anthropic", "claude-test", hourly) == Cost(
        None, "the table has no hour-long cache write price for model 'claude-test'"
    )


def test_counts_by_name_cost_as_an_answer_would(shipped: PriceTable) -> None:
    counts = {"input_tokens": 1000, "output_tokens": 500, "cache_read_tokens": 2000}
    usage = Metered(input_tokens=1000, output_tokens=500, cache_read_tokens=2000)
    assert shipped.cost("anthropic", "claude-sonnet-4-5", counts) == shipped.cost(
        "anthropic", "claude-sonnet-4-5", usage
    )
    assert shipped.cost("anthropic", "claude-sonnet-4-5", {"output_tokens": 1}).usd is None


def test_a_cost_has_a_figure_or_a_reason() -> None:
    with pytest.raises(ValueError):
        Cost(None)
    with pytest.raises(ValueError):
        Cost(1.0, "both")


# A user's own table


def test_a_users_table_replaces_the_shipped_one(tmp_path: Path) -> None:
    path = write_table(tmp_path, table_document())
    table = load_price_table(path)
    assert not table.shipped
    assert table.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    usage = Metered(input_tokens=1_000_000, output_tokens=0)
    assert table.cost("anthropic", "claude-test-20261201", usage) == Cost(2.0)
    assert table.cost("anthropic", "claude-sonnet-4-5", usage).usd is None  # not merged


def bad_models(**changes: Any) -> dict[str, Any]:
    model = {**table_document()["models"][0], **changes}
    return table_document(models=[model])


@pytest.mark.parametrize(
    ("document", "words"),
    [
        (table_document(extra="field"), "extra"),
        (table_document(schema="mailroom.price_table/v2"), "schema"),
        (table_document(currency="EUR"), "currency"),
        (table_document(retrieved="06/12/2026"), "retrieved"),
        (table_document(models="none"), "models"),
        (bad_models(input=-0.5), "input"),
        (bad_models(output="15"), "output"),
        (bad_models(cache_read=True), "cache_read"),
        (bad_models(provider="google"), "provider"),
        (bad_models(model=""), "model"),
        (bad_models(model="m" * 201), "model"),
        (bad_models(model="with space"), "model"),
        (bad_models(aliases=["claude-test"]), "listed twice"),
        (bad_models(discount=0.5), "discount"),
        (
            bad_models(
                long_context={"above_prompt_tokens": 0, "input": 1, "output": 1, "cache_read": 1}
            ),
            "above_prompt_tokens",
        ),
        (
            table_document(models=[table_document()["models"][1]] * 2),
            "listed twice",
        ),
        ([1, 2], "the table"),
    ],
    ids=range(17),
)
def test_an_invalid_table_is_refused(tmp_path: Path, document: Any, words: str) -> None:
    with pytest.raises(PriceTableError, match="is invalid") as refused:
        load_price_table(write_table(tmp_path, document))
    assert words in str(refused.value)


def test_each_kind_of_unusable_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PriceTableError, match="does not exist"):
        load_price_table(tmp_path / "missing.json")
    with pytest.raises(PriceTableError, match="not a regular file"):
        load_price_table(tmp_path)
    latin = tmp_path / "latin.json"
    latin.write_bytes(
        json.dumps(table_document(source="café"), ensure_ascii=False)
        .encode()
        .replace(b"\xc3\xa9", b"\xe9")
    )
    with pytest.raises(PriceTableError, match="not UTF-8"):
        load_price_table(latin)
    for text in (
        "{",
        "",
        json.dumps(table_document()).replace('"input": 2', '"input": NaN'),
        json.dumps(table_document()).replace('"input": 2', '"input": 2, "input": 3'),
        "[" * 100_000,
    ):
        path = tmp_path / "broken.json"
        path.write_text(text)
        with pytest.raises(PriceTableError, match="is not JSON"):
            load_price_table(path)
    infinite = tmp_path / "infinite.json"
    infinite.write_text(json.dumps(table_document()).replace('"input": 2', '"input": 1e999'))
    with pytest.raises(PriceTableError, match="is invalid"):
        load_price_table(infinite)
    big = tmp_path / "big.json"
    big.write_text(json.dumps(table_document(source="s" * 10)) + " " * MAX_TABLE_BYTES)
    with pytest.raises(PriceTableError, match="larger than"):
        load_price_table(big)
    assert issubclass(PriceTableError, ValueError)
