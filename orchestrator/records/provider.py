"""What a method declares of its model provider, as its profile and the run's manifest
record it: which API it speaks, the routes the provider gateway forwards, where the key
is read from, and the method's own per-episode budgets.

The gateway that enforces it is `orchestrator/gateway/`; the profile that declares it is
`actors/profiles.py`. This is only the vocabulary both are written in.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# The provider APIs a method may declare: Anthropic's Messages API, OpenAI's Responses
# API and Google's Gemini API.
ProviderKind = Literal["anthropic", "openai_responses", "gemini"]
# A route is a method and a path; `{model}` stands for one model name in the path (the
# Gemini API names the model there: `POST /v1beta/models/{model}:generateContent`).
ROUTE = re.compile(r"^(GET|POST) (/(?:[A-Za-z0-9._~/:-]|\{model\}){1,200})$")
MODEL_IN_ROUTE = "{model}"
MODEL_SEGMENT = r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}"
VARIABLE = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
DEFAULT_MAX_REQUEST_BYTES = 32 << 20  # a request body past this is refused, never forwarded


class ProviderBudgets(BaseModel):
    """Per-episode limits the method declares (null: none); past one the gateway refuses
    further requests and the episode ends as `provider_budget_exhausted`. A method's
    declared limit, never a benchmark-wide rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requests: Annotated[int, Field(ge=1)] | None = None
    input_tokens: Annotated[int, Field(ge=1)] | None = None
    output_tokens: Annotated[int, Field(ge=1)] | None = None
    cost_usd: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in self.model_dump().values())


class ProviderDeclaration(BaseModel):
    """A profile's `"provider"`: how its agent reaches its model through the gateway.

    `key_variable` names the launch environment variable that holds the real key (read by
    the gateway, never passed into a sandbox); inside the sandbox the same variable holds
    the episode's own token. `base_url_variable` names the variable that, set in the
    launch environment, replaces the provider's public API as the upstream (a proxy, a
    stand-in); inside the sandbox it holds the gateway's loopback URL, `base_path`
    appended (Codex's base URL ends in `/v1`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ProviderKind
    key_variable: Annotated[str, Field(pattern=VARIABLE.pattern)]
    base_url_variable: Annotated[str, Field(pattern=VARIABLE.pattern)]
    base_path: Annotated[str, Field(pattern=r"^(/[A-Za-z0-9._-]{1,50}){0,4}$")] = ""
    routes: Annotated[list[str], Field(min_length=1, max_length=32)]
    max_request_bytes: Annotated[int, Field(ge=1024, le=1 << 30)] = DEFAULT_MAX_REQUEST_BYTES
    budgets: ProviderBudgets = Field(default_factory=ProviderBudgets)

    @field_validator("routes")
    @classmethod
    def _routes(cls, routes: list[str]) -> list[str]:
        for route in routes:
            if not ROUTE.match(route) or "//" in route or "/." in route:
                raise ValueError(
                    f"{route!r} is not a route ('POST /v1/messages', "
                    "'POST /v1beta/models/{model}:generateContent')"
                )
        if len(set(routes)) != len(routes):
            raise ValueError("a route is declared twice")
        return routes

    def allows(self, method: str, path: str) -> bool:
        """Whether `method path` (the path without its query) is a declared route."""
        asked = f"{method} {path}"
        return asked in self.routes or any(
            MODEL_IN_ROUTE in route and _route_pattern(route).fullmatch(asked)
            for route in self.routes
        )


@functools.cache
def _route_pattern(route: str) -> re.Pattern[str]:
    return re.compile(MODEL_SEGMENT.join(re.escape(part) for part in route.split(MODEL_IN_ROUTE)))
