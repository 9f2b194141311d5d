"""ADK's wire format for credentials: a call waiting for the user's credential is shown to
ADK's client as an `adk_request_credential` function call carrying ADK's AuthConfig, and
the client's function response to it, the same AuthConfig with the credential filled in,
supplies it."""

from __future__ import annotations

from typing import Any

from google.genai import types

from toolfleet.orchestrator.adkwire.confirming import asking
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.auth import AuthConfig
from toolfleet.shared.unicode_text import has_lone_surrogates

REQUEST_CREDENTIAL = "adk_request_credential"
_CALL_ID_PREFIX = "adk-credential-"


def credential_call_id(call_id: str) -> str:
    """The id of the `adk_request_credential` call shown for waiting call `call_id`."""
    return _CALL_ID_PREFIX + call_id


def adk_auth_config(config: dict[str, Any]) -> dict[str, Any]:
    """toolfleet's AuthConfig (as JSON) as ADK's AuthConfig serialises: its scheme as an
    OpenAPI security scheme, an empty credential of that kind, and its key."""
    auth = AuthConfig.model_validate(config)
    scheme: dict[str, Any]
    raw: dict[str, Any]
    if auth.scheme == "api_key":
        scheme = {"type": "apiKey", "in": "header", "name": auth.key}
        raw = {"authType": "apiKey"}
    elif auth.scheme == "oauth2":
        flow = {
            "authorizationUrl": auth.authorization_url or "",
            "tokenUrl": "",
            "scopes": {s: "" for s in auth.scopes},
        }
        scheme = {"type": "oauth2", "flows": {"authorizationCode": flow}}
        raw = {"authType": "oauth2", "oauth2": {}}
    else:
        scheme = {"type": "http", "scheme": "bearer"}
        raw = {"authType": "http", "http": {"scheme": "bearer", "credentials": {}}}
    if auth.description:
        scheme["description"] = auth.description
    return {"authScheme": scheme, "rawAuthCredential": raw, "credentialKey": auth.key}


def with_credential_calls(event: Event) -> Event:
    """`event` as ADK's client sees a call waiting for a credential: one
    `adk_request_credential` call per such call (ids in long_running_tool_ids, as ADK
    marks them), its arguments the call's id and ADK's AuthConfig."""
    if not event.credential_requests:
        return event
    calls = [
        types.FunctionCall(
            id=credential_call_id(r["call_id"]),
            name=REQUEST_CREDENTIAL,
            args={
                "functionCallId": r["call_id"],
                "authConfig": adk_auth_config(r.get("auth_config") or {}),
            },
        )
        for r in event.credential_requests
    ]
    return asking(event, calls)


def credential_answer(response: types.FunctionResponse) -> tuple[str, str] | None:
    """(call id, credential) when `response` answers an `adk_request_credential` call;
    None for any other response.

    Raises:
        ValueError: The response carries no id of a request, or no credential (a bearer
            token, an API key or an OAuth2 access token) in its AuthConfig."""
    if response.name != REQUEST_CREDENTIAL:
        return None
    call_id = (response.id or "").removeprefix(_CALL_ID_PREFIX)
    if not response.id or call_id == response.id:
        raise ValueError(
            f"a response to {REQUEST_CREDENTIAL} must carry the id of the call it answers "
            f"(it starts with {_CALL_ID_PREFIX!r}), not {response.id!r}"
        )
    answer = dict(response.response or {})
    for field in ("exchangedAuthCredential", "exchanged_auth_credential", "rawAuthCredential",
                  "raw_auth_credential"):  # fmt: skip
        secret = _secret_of(answer.get(field))
        if secret and has_lone_surrogates(secret):
            raise ValueError(f"the credential of {response.id!r} is not Unicode text")
        if secret:
            return call_id, secret
    raise ValueError(
        f"the response to {REQUEST_CREDENTIAL} {response.id!r} carries no credential: fill in "
        "exchangedAuthCredential (http.credentials.token, apiKey or oauth2.accessToken)"
    )


def _secret_of(credential: Any) -> str | None:
    """The token, key or access token in ADK's AuthCredential (camelCase or snake_case)."""
    if not isinstance(credential, dict):
        return None
    api_key = credential.get("apiKey") or credential.get("api_key")
    http = credential.get("http") or {}
    given = http.get("credentials") if isinstance(http, dict) else None
    token = given.get("token") if isinstance(given, dict) else None
    oauth2 = credential.get("oauth2") or {}
    access = (
        oauth2.get("accessToken") or oauth2.get("access_token")
        if isinstance(oauth2, dict)
        else None
    )
    secret = api_key or token or access
    return secret if isinstance(secret, str) and secret else None
