"""The user's credential for a remote API or MCP server, through the credential store:
asked for on first use, then sent as a header by the worker (never stored in a call)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolfleet.shared.auth import AuthConfig
from toolfleet.shared.context import ToolContext
from toolfleet.shared.redaction import DEFAULT_SECRET_NAMES, mask_values, redact_deep

# The response of a call that asked the user for a credential (the model does not see
# it: the call runs again once the credential is supplied).
AWAITING_CREDENTIAL: dict[str, Any] = {
    "status": "pending",
    "message": "waiting for the user's credential",
}


def stored_credential(tool_context: ToolContext, auth: AuthConfig) -> str | None:
    """The user's credential for `auth`; None after asking the user for it."""
    token = tool_context.get_auth_response(auth)
    if token is None:
        tool_context.request_credential(auth)
    return token


def credential_header(auth: AuthConfig, token: str, api_key_header: str) -> tuple[str, str]:
    """The header that carries `token`: a bearer token for "bearer" and "oauth2", else the
    key itself in `api_key_header`."""
    if auth.scheme == "api_key":
        return api_key_header, token
    return "Authorization", f"Bearer {token}"


@dataclass(frozen=True)
class Secrets:
    """Values sent with a request that must never come back in a result: header values,
    tokens, and the names of keys whose values are masked at any depth."""

    values: tuple[str, ...] = ()
    names: tuple[str, ...] = DEFAULT_SECRET_NAMES

    def mask(self, value: Any) -> Any:
        """`value` (JSON or text) with secret-named keys and secret values masked, in every
        string at any depth (dict keys included), however an error message spells them."""
        return _mask_strings(redact_deep(value, self.names), _spellings(self.values))


def _spellings(values: tuple[str, ...]) -> tuple[str, ...]:
    """Each secret value as an error may quote it: as it is, without the blanks around it
    (a pasted key's line break), and escaped as Python shows text and bytes
    (`b'key\\n'` in httpx's "illegal header value")."""
    spelled: list[str] = []
    for value in values:
        escaped_bytes = repr(value.encode("utf-8", "surrogatepass"))[2:-1]
        spelled += [value, value.strip(), repr(value)[1:-1], escaped_bytes]
    return tuple(v for v in dict.fromkeys(spelled) if v)


def _mask_strings(value: Any, secrets: tuple[str, ...]) -> Any:
    if not secrets:
        return value
    if isinstance(value, str):
        return mask_values(value, secrets)
    if isinstance(value, dict):
        return {_mask_strings(k, secrets): _mask_strings(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_mask_strings(v, secrets) for v in value]
    return value
