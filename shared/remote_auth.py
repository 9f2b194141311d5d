"""The user's credential for a remote API or MCP server, through the credential store:
asked for on first use, then sent as a header by the worker (never stored in a call)."""

from __future__ import annotations

from typing import Any

from toolfleet.shared.auth import AuthConfig
from toolfleet.shared.context import ToolContext

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
