"""ADK api_server's shapes of toolfleet's events, sessions and artifact versions: what
ADK's clients read with ADK's models (camelCase, None left out, only ADK's fields in
`actions`), and the artifact versions and their deletion behind ADK's artifact routes."""

from __future__ import annotations

import fakeredis
import pytest
from google.genai import types
from pydantic import ValidationError

from toolfleet.orchestrator.adkwire.confirming import confirmation_answer
from toolfleet.orchestrator.adkwire.credentials import REQUEST_CREDENTIAL, credential_answer
from toolfleet.orchestrator.httpapi.adk_wire import (
    CreateSessionRequest,
    RunAgentRequest,
    adk_event,
    adk_session,
)
from toolfleet.orchestrator.httpapi.routes_adk_run import _split_artifacts
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.artifacts import ArtifactStore
from toolfleet.shared.completions import UNCHANGED
from toolfleet.shared.confirmation import REQUEST_CONFIRMATION
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import ToolActions

# EventActions' fields in ADK 2.x; ADK's model refuses any other (extra="forbid").
ADK_ACTIONS = {
    "skipSummarization", "stateDelta", "artifactDelta", "transferToAgent", "transferReason",
    "escalate", "requestedAuthConfigs", "requestedToolConfirmations", "compaction",
    "endOfAgent", "agentState", "rewindBeforeInvocationId", "route", "renderUiWidgets",
    "setModelResponse",
}  # fmt: skip
ADK_SESSION = {"id", "appName", "userId", "state", "events", "lastUpdateTime"}


def call_event(*names: str) -> Event:
    parts = [
        types.Part(function_call=types.FunctionCall(id=f"c-{n}", name=n, args={"x": 1}))
        for n in names
    ]
    return Event(
        invocation_id="inv", author="desk", content=types.Content(role="model", parts=parts)
    )


def test_an_event_is_camel_case_with_adks_four_action_maps_and_no_nones() -> None:
    event = call_event("check_stock").model_copy(update={"state_delta": {"last": "pens"}})
    shaped = adk_event(event, set(), ())
    assert shaped["invocationId"] == "inv" and shaped["author"] == "desk"
    call = shaped["content"]["parts"][0]["functionCall"]
    assert call == {"id": "c-check_stock", "name": "check_stock", "args": {"x": 1}}
    assert shaped["actions"] == {
        "stateDelta": {"last": "pens"},
        "artifactDelta": {},
        "requestedAuthConfigs": {},
        "requestedToolConfirmations": {},
    }
    assert shaped["longRunningToolIds"] == []  # ADK sets it on every event with calls
    assert "branch" not in shaped and "errorMessage" not in shaped
    assert set(shaped["actions"]) <= ADK_ACTIONS


def test_calls_of_long_running_tools_are_named_in_long_running_tool_ids() -> None:
    shaped = adk_event(call_event("check_stock", "request_refund"), {"request_refund"}, ())
    assert shaped["longRunningToolIds"] == ["c-request_refund"]


def test_a_confirmation_request_is_adks_request_confirmation_call_and_action() -> None:
    request = {"call_id": "c1", "tool": "pay", "args": {"amount": 5}, "hint": "Pay 5?"}
    event = Event(invocation_id="inv", author="desk", confirmation_requests=[request])
    shaped = adk_event(event, set(), ())
    (part,) = shaped["content"]["parts"]
    assert part["functionCall"]["name"] == REQUEST_CONFIRMATION
    original = part["functionCall"]["args"]["originalFunctionCall"]
    assert original == {"id": "c1", "name": "pay", "args": {"amount": 5}}
    assert shaped["longRunningToolIds"] == [part["functionCall"]["id"]]
    assert shaped["actions"]["requestedToolConfirmations"]["c1"]["hint"] == "Pay 5?"


@pytest.mark.parametrize(
    ("said", "confirmed"),
    [(True, True), (False, False), ("false", False), ("no", False), (0, False), ("yes", True)],
)
def test_a_confirmations_answer_is_read_as_adk_reads_it(said: object, confirmed: bool) -> None:
    answer = types.FunctionResponse(
        id="adk-confirm-c1", name=REQUEST_CONFIRMATION, response={"confirmed": said}
    )
    got = confirmation_answer(answer)
    assert got is not None and (got.call_id, got.asked, got.confirmed) == ("c1", 0, confirmed)


@pytest.mark.parametrize("said", ["maybe", [0], {"yes": 1}, 2])
def test_a_confirmations_answer_that_is_neither_yes_nor_no_is_refused(said: object) -> None:
    answer = types.FunctionResponse(
        id="adk-confirm-c1", name=REQUEST_CONFIRMATION, response={"confirmed": said}
    )
    with pytest.raises(ValueError, match="neither yes nor no"):
        confirmation_answer(answer)


@pytest.mark.parametrize(
    ("wrapped", "confirmed", "payload"),
    [
        ('{"confirmed": true}', True, UNCHANGED),
        ('{"confirmed": false}', False, UNCHANGED),
        ('{"confirmed": true, "payload": {"seats": 2}}', True, {"seats": 2}),
    ],
)
def test_a_confirmation_wrapped_as_adks_client_sends_it_is_read_inside(
    wrapped: str, confirmed: bool, payload: object
) -> None:
    """ADK's dev UI sends the ToolConfirmation as JSON text under `response`."""
    answer = types.FunctionResponse(
        id="adk-confirm-c1", name=REQUEST_CONFIRMATION, response={"response": wrapped}
    )
    assert confirmation_answer(answer) == ("c1", 0, confirmed, payload)


@pytest.mark.parametrize(
    "wrapped", ["yes", "[true]", '"{}"', {"confirmed": True}, "[" * 100_000 + "]" * 100_000]
)
def test_a_wrapped_confirmation_that_is_no_object_is_refused(wrapped: object) -> None:
    answer = types.FunctionResponse(
        id="adk-confirm-c1", name=REQUEST_CONFIRMATION, response={"response": wrapped}
    )
    with pytest.raises(ValueError, match="wraps no confirmation"):
        confirmation_answer(answer)


def test_a_credential_request_is_adks_request_credential_call_with_adks_auth_config() -> None:
    auth = {"key": "bank_api", "scheme": "bearer", "description": "Your bank token."}
    request = {"call_id": "c2", "tool": "balance", "auth_config": auth}
    event = Event(invocation_id="inv", author="bank", credential_requests=[request])
    shaped = adk_event(event, set(), ())
    (part,) = shaped["content"]["parts"]
    call = part["functionCall"]
    assert call["name"] == REQUEST_CREDENTIAL and call["args"]["functionCallId"] == "c2"
    adk_auth = call["args"]["authConfig"]
    assert adk_auth["authScheme"] == {
        "type": "http", "scheme": "bearer", "description": "Your bank token."
    }  # fmt: skip
    assert adk_auth["credentialKey"] == "bank_api"
    assert shaped["actions"]["requestedAuthConfigs"] == {"c2": adk_auth}
    assert shaped["longRunningToolIds"] == [call["id"]]

    # ADK's client answers with the same AuthConfig, its credential filled in.
    filled = {**adk_auth, "exchangedAuthCredential": {"authType": "http", "http": {
        "scheme": "bearer", "credentials": {"token": "tok-1"}}}}  # fmt: skip
    answer = types.FunctionResponse(id=call["id"], name=REQUEST_CREDENTIAL, response=filled)
    assert credential_answer(answer) == ("c2", 0, "bank_api", "tok-1")
    keyed = {"rawAuthCredential": {"authType": "apiKey", "apiKey": "k-2"}, "credential_key": "k"}
    assert credential_answer(answer.model_copy(update={"response": keyed})) == ("c2", 0, "k", "k-2")
    assert credential_answer(types.FunctionResponse(id="x", name="other", response={})) is None
    with pytest.raises(ValueError, match="carries no credential"):
        credential_answer(answer.model_copy(update={"response": adk_auth}))
    unencodable = {"exchangedAuthCredential": {"apiKey": "k-\ud800"}, "credentialKey": "k"}
    with pytest.raises(ValueError, match="not Unicode text"):
        credential_answer(answer.model_copy(update={"response": unencodable}))
    for shapeless in ("tok-1", ["tok-1"], None):  # not ADK's HttpCredentials: no credential
        odd = {
            "exchangedAuthCredential": {"http": {"credentials": shapeless}},
            "credentialKey": "k",
        }
        with pytest.raises(ValueError, match="carries no credential"):
            credential_answer(answer.model_copy(update={"response": odd}))
    with pytest.raises(ValueError, match="must carry the id"):
        credential_answer(answer.model_copy(update={"id": "c2"}))


def test_secret_named_arguments_and_state_are_masked() -> None:
    event = Event(
        invocation_id="inv",
        author="desk",
        content=types.Content(
            role="model",
            parts=[
                types.Part(function_call=types.FunctionCall(name="login", args={"password": "pw"}))
            ],
        ),
        state_delta={"api_key": "k"},
    )
    shaped = adk_event(event, set(), ("password", "api_key"))
    assert shaped["content"]["parts"][0]["functionCall"]["args"]["password"] != "pw"
    assert shaped["actions"]["stateDelta"]["api_key"] != "k"


def test_a_session_has_only_adks_fields_and_hides_its_initial_state_event() -> None:
    initial = Event(invocation_id="", author="user", state_delta={"tier": "gold"})
    said = Event(
        invocation_id="inv", author="user", timestamp=7.5,
        content=types.Content(role="user", parts=[types.Part(text="hi")]),
    )  # fmt: skip
    session = Session(id="s", app_name="desk", user_id="u", events=[initial, said])
    session.state = {"tier": "gold"}
    shaped = adk_session(session, set(), ())
    assert set(shaped) == ADK_SESSION
    assert [e["id"] for e in shaped["events"]] == [said.id]
    assert shaped["state"] == {"tier": "gold"} and shaped["lastUpdateTime"] == 7.5


def test_an_event_with_content_and_artifacts_streams_as_two_frames_as_adks_ui_reads_it() -> None:
    event = call_event("save_note").model_copy(
        update={"actions": ToolActions(artifact_delta={"note.txt": 0})}
    )
    content_frame, actions_frame = _split_artifacts(adk_event(event, set(), ()))
    assert content_frame["actions"]["artifactDelta"] == {} and "content" in content_frame
    assert actions_frame["actions"]["artifactDelta"] == {"note.txt": 0}
    assert "content" not in actions_frame and actions_frame["id"] == content_frame["id"]
    plain = adk_event(call_event("x"), set(), ())
    assert _split_artifacts(plain) == [plain]


def test_requests_take_adks_camel_case_and_snake_case_and_ignore_newer_fields() -> None:
    camel = RunAgentRequest.model_validate(
        {
            "appName": "desk",
            "userId": "u",
            "sessionId": "s",
            "newMessage": {"role": "user", "parts": [{"text": "hi"}]},
            "serviceTier": "x",
        }
    )
    message = {"parts": [{"function_response": {"id": "c1", "name": "t", "response": {}}}]}
    snake = RunAgentRequest.model_validate(
        {"app_name": "desk", "user_id": "u", "session_id": "s", "new_message": message}
    )
    assert (camel.app_name, camel.user_id, camel.session_id) == ("desk", "u", "s")
    assert camel.new_message.parts is not None and camel.new_message.parts[0].text == "hi"
    assert snake.streaming is False and snake.app_name == "desk"
    created = CreateSessionRequest.model_validate({"sessionId": "abc", "state": {"a": 1}})
    assert (created.session_id, created.state) == ("abc", {"a": 1})


def test_artifact_versions_keep_their_save_times_and_delete_forgets_every_version() -> None:
    store = ArtifactStore(fakeredis.FakeRedis(), Keys("t"))
    first = store.save("desk", "u", "s", "note.txt", types.Part(text="one"))
    second = store.save("desk", "u", "s", "note.txt", types.Part(text="two"))
    image = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG"))
    store.save("desk", "u", "s", "pic.png", image)
    versions = store.versions("desk", "u", "s", "note.txt")
    assert (first, second) == (0, 1)
    assert [v.version for v in versions] == [0, 1]
    assert 0 < versions[0].saved_at <= versions[1].saved_at
    assert versions[0].mime_type is None
    assert store.versions("desk", "u", "s", "pic.png")[0].mime_type == "image/png"
    store.delete("desk", "u", "s", "note.txt")
    assert store.versions("desk", "u", "s", "note.txt") == ()
    assert store.load("desk", "u", "s", "note.txt") is None
    assert store.list("desk", "u", "s") == ["pic.png"]
    assert store.versions("desk", "u", "other", "pic.png") == ()  # another session's


def test_a_run_request_is_refused_without_ids_or_anything_to_run() -> None:
    good: dict[str, object] = {"appName": "desk", "userId": "u", "sessionId": "s"}
    hi = {"parts": [{"text": "hi"}]}
    refused: list[dict[str, object]] = [
        good,  # no message
        {**good, "newMessage": {}},
        {**good, "newMessage": {"parts": [{"text": ""}]}},
        {**good, "userId": "../alice", "newMessage": hi},
        {**good, "appName": "", "newMessage": hi},
        # google-genai's own validator raises AttributeError on this part
        {**good, "newMessage": {"parts": [{"spreadsheetMetadata": {"contentLayers": [None]}}]}},
    ]
    for body in refused:
        with pytest.raises(ValidationError):
            RunAgentRequest.model_validate(body)
    with pytest.raises(ValidationError):
        CreateSessionRequest.model_validate({"events": [{}]})
    assert CreateSessionRequest.model_validate({"events": []}).events == []
