"""A method profile whose actor reaches an Anthropic provider only through the provider
gateway (`confinement.network: gateway`), for the test actors that ask one."""

from __future__ import annotations

from typing import Any


def anthropic_gateway_profile(name: str, purpose: str, actor: dict[str, Any]) -> dict[str, Any]:
    """The profile `name`: its actor `actor` (its command, and a trace format if it
    prints one), declared to use claude-haiku-4-5 by the Messages API."""
    return {
        "profile": name,
        "method_family": "code_agent_direct_control",
        "purpose": purpose,
        "instructions": "prompts/actor_instructions_v2.txt",
        "declared_models": [
            {
                "role": "actor",
                "identity": "claude-haiku-4-5",
                "provider": "anthropic",
                "verified": False,
            }
        ],
        "confinement": {"network": "gateway"},
        "provider": {
            "kind": "anthropic",
            "key_variable": "ANTHROPIC_API_KEY",
            "base_url_variable": "ANTHROPIC_BASE_URL",
            "routes": ["POST /v1/messages"],
        },
        "actor": actor,
    }
