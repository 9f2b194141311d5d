"""ADK's wire format for credentials: a call waiting for the user's credential is shown to
ADK's client as an `adk_request_credential` function call carrying ADK's AuthConfig, and
the client's function response to it, the same AuthConfig with the credential filled in,
supplies it."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from google.genai import types

from toolfleet.orchestrator.adkwire.confirming import asking
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.auth import AuthConfig
from toolfleet.shared.unicode_text import has_lone_surrogates

REQUEST_CREDENTIAL = "adk_request_credential"
_CALL_ID_PREFIX = "adk-credential-"
# A request made again (`asked_again` n > 0) is a new one, as ADK gives each its own id:
# `adk-credential-<call id>~<n>`. No call id the loop makes holds a `~`.
_ASKED_AGAIN = re.compile(r"(?P<call_id>.+)~(?P<asked>[1-9][0-9]{0,8})", re.S)


class CredentialAnswer(NamedTuple):
    """The user's answer to one `adk_request_credential` call: the waiting call, the
    request it answers (the call's `asked_again` then), the credential key it names and
    the credential."""

    call_id: str
    asked: int
    credential_key: str
    secret: str


def credential_call_id(call_id: str, asked: int = 0) -> str:
    """The id of the `adk_request_credential` call shown for waiting call `call_id`'s
    request `asked` (its `asked_again` when it asked)."""
    return f"{_CALL_ID_PREFIX}{call_id}~{asked}" if asked else _CALL_ID_PREFIX + call_id


def _requested(request_id: str | None) -> tuple[str, int]:
    """(call id, request) that an `adk_request_credential` call's id names.

    Raises:
        ValueError: It is not such an id."""
    named = (request_id or "").removeprefix(_CALL_ID_PREFIX)
    if not request_id or not named or named == request_id:
        raise ValueError(
            f"a response to {REQUEST_CREDENTIAL} must carry the id of the call it answers "
            f"(it starts with {_CALL_ID_PREFIX!r}), not {request_id!r}"
        )
    again = _ASKED_AGAIN.fullmatch(named)
    return (again["call_id"], int(again["asked"])) if again else (named, 0)


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
            id=credential_call_id(r["call_id"], r.get("asked_again", 0)),
            name=REQUEST_CREDENTIAL,
            args={
                "functionCallId": r["call_id"],
                "authConfig": adk_auth_config(r.get("auth_config") or {}),
            },
        )
        for r in event.credential_requests
    ]
    return asking(event, calls)


def credential_answer(response: types.FunctionResponse) -> CredentialAnswer | None:
    """The user's answer when `response` answers an `adk_request_credential` call; None
    for any other response. It names its request by the call's id and by the
    AuthConfig's `credentialKey`, sent back as given.

    Raises:
        ValueError: The response carries no id of a request, no credential key, or no
            credential (a bearer token, an API key or an OAuth2 access token) in its
            AuthConfig."""
    if response.name != REQUEST_CREDENTIAL:
        return None
    call_id, asked = _requested(response.id)
    answer = dict(response.response or {})
    key = _credential_key(response.id, answer)
    for field in ("exchangedAuthCredential", "exchanged_auth_credential", "rawAuthCredential",
                  "raw_auth_credential"):  # fmt: skip
        secret = _secret_of(answer.get(field))
        if secret and has_lone_surrogates(secret):
            raise ValueError(f"the credential of {response.id!r} is not Unicode text")
        if secret:
            return CredentialAnswer(call_id, asked, key, secret)
    raise ValueError(
        f"the response to {REQUEST_CREDENTIAL} {response.id!r} carries no credential: fill in "
        "exchangedAuthCredential (http.credentials.token, apiKey or oauth2.accessToken)"
    )


def _credential_key(response_id: str | None, answer: dict[str, Any]) -> str:
    """The credential key an answer names, camelCase or snake_case (ADK reads either).

    Raises:
        ValueError: It names none, or two that differ."""
    named = [answer[k] for k in ("credentialKey", "credential_key") if k in answer]
    if not named or not all(isinstance(k, str) and k for k in named):
        raise ValueError(
            f"the response to {REQUEST_CREDENTIAL} {response_id!r} names no credential key: "
            "send back the authConfig of its call, its credentialKey as given"
        )
    if len(set(named)) > 1:
        raise ValueError(
            f"the response to {REQUEST_CREDENTIAL} {response_id!r} names two credential keys: "
            "send back the authConfig of its call, its credentialKey as given"
        )
    key: str = named[0]
    return key


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
