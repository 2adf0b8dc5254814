"""What the gateway must know of each provider API it speaks: its public address, how a
key travels, and how its errors look (a refusal is shaped as the provider's own error,
so the agent's client reports it as an API error rather than a broken connection).

The Gemini API's errors are Google's (`{"error": {"code", "message", "status"}}`, the
status a google.rpc code name); the gateway's own reason goes in an `ErrorInfo` detail.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mailroom.orchestrator.records.provider import ProviderKind


@dataclass(frozen=True)
class ProviderApi:
    kind: ProviderKind
    public_base_url: str
    # The request header the key travels in, and its prefix ("Bearer ").
    key_header: str
    key_prefix: str

    def key_headers(self, key: str) -> dict[str, str]:
        return {self.key_header: self.key_prefix + key}

    def error_body(self, status: int, error_type: str, message: str) -> bytes:
        """A refusal in the provider's own error shape."""
        document: dict[str, object]
        if self.kind == "gemini":
            document = {
                "error": {
                    "code": status,
                    "message": message,
                    "status": GOOGLE_STATUS.get(status, "UNKNOWN"),
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                            "reason": error_type.upper(),
                            "domain": "mailroom.gateway",
                        }
                    ],
                }
            }
        elif self.kind == "anthropic":
            document = {
                "type": "error",
                "error": {"type": error_type, "message": message},
            }
        else:
            document = {
                "error": {"type": error_type, "message": message, "code": error_type, "param": None}
            }
        return json.dumps(document).encode()


PROVIDER_APIS: dict[ProviderKind, ProviderApi] = {
    "anthropic": ProviderApi("anthropic", "https://api.anthropic.com", "x-api-key", ""),
    "openai_responses": ProviderApi(
        "openai_responses", "https://api.openai.com/v1", "authorization", "Bearer "
    ),
    "gemini": ProviderApi(
        "gemini", "https://generativelanguage.googleapis.com", "x-goog-api-key", ""
    ),
}
# The google.rpc code name of each status the gateway answers with itself.
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    502: "UNAVAILABLE",
}
# Query parameters that may carry a credential (the Gemini API also takes `?key=`):
# never forwarded as the agent sent them.
CREDENTIAL_QUERY = frozenset({"key", "access_token"})
# Headers that may carry a credential: never forwarded as the agent sent them, never kept.
CREDENTIAL_HEADERS = frozenset(
    {
        "x-api-key",
        "x-goog-api-key",
        "authorization",
        "proxy-authorization",
        "cookie",
        "openai-organization",
        "x-goog-user-project",
        "x-gemini-api-privileged-user-id",
    }
)
# Hop-by-hop headers (RFC 9110 7.6.1): never passed on, either way.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# And those the gateway sets itself, or that would say where the request came from.
NOT_FORWARDED = HOP_BY_HOP | {
    "host",
    "content-length",
    "accept-encoding",
    "expect",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
}
# The answer's length and encoding are the gateway's own (it streams it decoded); the
# provider's cookies, server and date are not the agent's business.
NOT_RETURNED = HOP_BY_HOP | {"content-length", "content-encoding", "set-cookie", "server", "date"}


def presented_token(headers: dict[str, str]) -> str | None:
    """The token a request presents: `x-api-key`, `x-goog-api-key`, or `Authorization:
    Bearer` (a provider's client may use another's)."""
    for name in ("x-api-key", "x-goog-api-key"):
        key = headers.get(name)
        if key:
            return key.strip()
    authorization = headers.get("authorization", "")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None
