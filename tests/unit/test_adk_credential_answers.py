"""ADK's client's answer to `adk_request_credential` names the request it answers: the
call's id (a request made again has an id of its own) and the AuthConfig's
`credentialKey`, sent back as given. A replayed answer, one naming another key or none,
or another user's, is refused, and nothing is stored."""

from __future__ import annotations

from typing import Any

import fakeredis
import pytest
from google.genai import types

from tests.unit.adk_shown import first_call_shown
from tests.unit.credential_cases import GITHUB, SLACK, stores, waiting
from tests.unit.test_posted_answers import KEYS, posted
from toolfleet.orchestrator.adkwire.credentials import REQUEST_CREDENTIAL, with_credential_calls
from toolfleet.orchestrator.adkwire.posting import post_responses
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.errors import AwaitingCredentialError, CallNotPendingError
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import PendingCall

SESSION = session_key("app", "u", "s")


def shown_request(call: PendingCall) -> dict[str, Any]:
    """The `adk_request_credential` call ADK's client is shown for `call`'s request, as
    the event that asks for it holds the request."""
    asking = {"call_id": call.call_id, "tool": call.tool, "auth_config": call.ticket,
              "asked_again": call.asked_again}  # fmt: skip
    return first_call_shown(
        with_credential_calls(Event(invocation_id="i", author="a", credential_requests=[asking])),
        REQUEST_CREDENTIAL,
    )


def adk_answer(request: dict[str, Any], token: str, **changed: Any) -> types.FunctionResponse:
    """ADK's client's answer to `request`: its AuthConfig with the token filled in."""
    filled = {
        **request["args"]["authConfig"],
        "exchangedAuthCredential": {"authType": "http", "http": {
            "scheme": "bearer", "credentials": {"token": token}}},
        **changed,
    }  # fmt: skip
    return types.FunctionResponse(id=request["id"], name=REQUEST_CREDENTIAL, response=filled)


def without_key(answer: types.FunctionResponse) -> dict[str, Any]:
    return {k: v for k, v in (answer.response or {}).items() if k != "credentialKey"}


async def test_an_adk_answer_replayed_after_the_call_asked_for_another_key_is_not_stored() -> None:
    client = fakeredis.FakeRedis()
    completions, store = stores(client)
    first = waiting(completions, GITHUB)
    github_answer = adk_answer(shown_request(first), "gh-1")
    await post_responses(completions, SESSION, [github_answer], store)
    assert store.get("app", "u", GITHUB) == "gh-1"

    # The call ran again with it and now asks for Slack: the same answer, sent again
    # (a client's retry, a replay), is the GitHub token and answers no Slack request.
    client.delete(KEYS.completions("app"))
    second = waiting(completions, SLACK, asked_again=1)
    with pytest.raises(AwaitingCredentialError, match="asked again since"):
        await post_responses(completions, SESSION, [github_answer], store)
    assert store.get("app", "u", SLACK) is None and posted(client) == 0

    # ADK's client answers the request it is shown now: stored as the Slack token.
    slack_request = shown_request(second)
    assert slack_request["id"] != github_answer.id  # a new request, with an id of its own
    await post_responses(completions, SESSION, [adk_answer(slack_request, "sl-1")], store)
    assert store.get("app", "u", SLACK) == "sl-1" and store.get("app", "u", GITHUB) == "gh-1"


async def test_an_adk_answer_is_taken_only_from_its_user_for_the_key_asked() -> None:
    client = fakeredis.FakeRedis()
    completions, store = stores(client)
    request = shown_request(waiting(completions, SLACK))

    # Another user's session: no such call there.
    theirs = session_key("app", "mallory", "s")
    with pytest.raises(CallNotPendingError):
        await post_responses(completions, theirs, [adk_answer(request, "m-1")], store)
    # The request's id with another credential key (as ADK dumps it, either case).
    for named in ("credentialKey", "credential_key"):
        other = adk_answer(request, "gh-1")
        other.response = {**without_key(other), named: "github"}
        with pytest.raises(AwaitingCredentialError, match="not 'github'"):
            await post_responses(completions, SESSION, [other], store)
    # No credential key, a malformed one, or two that differ.
    keyless = adk_answer(request, "sl-1")
    keyless.response = without_key(keyless)
    odd_keys = [{"credentialKey": {"key": "slack"}}, {"credentialKey": ""}, {"credentialKey": 1}]
    odd = [adk_answer(request, "sl-1", **key) for key in odd_keys]
    for answer in (keyless, *odd):
        with pytest.raises(ValueError, match="names no credential key"):
            await post_responses(completions, SESSION, [answer], store)
    two = adk_answer(request, "sl-1", credential_key="github")
    with pytest.raises(ValueError, match="names two credential keys"):
        await post_responses(completions, SESSION, [two], store)
    # A request number the call never made.
    made_up = {**request, "id": request["id"] + "~7"}
    with pytest.raises(AwaitingCredentialError, match="request 7, now 0"):
        await post_responses(completions, SESSION, [adk_answer(made_up, "sl-1")], store)
    assert store.get("app", "u", SLACK) is None and store.get("app", "u", GITHUB) is None
    assert posted(client) == 0
