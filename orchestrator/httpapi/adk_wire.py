"""ADK api_server's bodies: its requests as ADK's clients send them (camelCase, snake_case
accepted too), and toolfleet's sessions and events as ADK serialises its own (camelCase,
None left out), so that ADK's clients and dev UI read them with ADK's models."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Annotated, Any

from google.genai import types
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic.alias_generators import to_camel

from toolfleet.orchestrator.adkwire.confirming import with_confirmation_calls
from toolfleet.orchestrator.adkwire.credentials import adk_auth_config, with_credential_calls
from toolfleet.orchestrator.httpapi.wire import ID_PATTERN
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.artifacts import ArtifactVersion
from toolfleet.shared.redaction import redact_deep
from toolfleet.shared.unicode_text import without_lone_surrogates

# ADK's request bodies: camelCase on the wire, snake_case accepted, unknown fields ignored
# (ADK's clients send fields of newer ADK versions too).
ADK_REQUEST = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")
# State written from a body: a lone surrogate ("\ud800") becomes U+FFFD, as in a message.
State = Annotated[dict[str, Any], AfterValidator(without_lone_surrogates)]


class RunAgentRequest(BaseModel):
    """The body of `/run` and `/run_sse`: one message to the agent of a session.

    Attributes:
        app_name: The app (agent) to run.
        user_id: The session's user.
        session_id: The session, which must exist.
        new_message: The user's message; FunctionResponse parts complete pending calls.
        streaming: ADK's token streaming; toolfleet's events are whole either way.
        state_delta: State written with the user's message, before the agent runs.
        invocation_id: ADK's invocation to resume; toolfleet resumes by completion.
        function_call_event_id: ADK's credential callback's event; not used.
        custom_metadata: Data ADK attaches to the run; not used.
    """

    model_config = ADK_REQUEST

    app_name: str = Field(pattern=ID_PATTERN)
    user_id: str = Field(pattern=ID_PATTERN)
    session_id: str = Field(pattern=ID_PATTERN)
    new_message: types.Content
    streaming: bool = False
    state_delta: State | None = None
    invocation_id: str | None = None
    function_call_event_id: str | None = None
    custom_metadata: dict[str, Any] | None = None

    @field_validator("new_message", mode="wrap")
    @classmethod
    def _says_something(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> types.Content:
        try:
            message: types.Content = handler(value)
        except ValidationError:
            raise
        except Exception as exc:  # google-genai's own validators may raise anything
            raise ValueError(f"the message is not a Content: {type(exc).__name__}") from exc
        if not any(
            p.text or p.inline_data or p.file_data or p.function_response
            for p in message.parts or ()
        ):
            raise ValueError(
                "the message has no part with text, data or a function response to run"
            )
        return message


class CreateSessionRequest(BaseModel):
    """The body of a session's creation: its id (random when left out) and initial state.

    Attributes:
        session_id: The new session's id; None: a random one.
        state: The initial state.
        events: ADK's events to start the session with; only an empty list is taken.
    """

    model_config = ADK_REQUEST

    session_id: str | None = Field(default=None, pattern=ID_PATTERN)
    state: State | None = None
    events: list[dict[str, Any]] | None = Field(
        default=None,
        max_length=0,
        description="Not supported: a session starts from its state (none here).",
    )


class UpdateSessionRequest(BaseModel):
    """The body of a session's PATCH: state written without running the agent.

    Attributes:
        state_delta: The writes, by key (app:, user: and temp: scopes apply).
    """

    model_config = ADK_REQUEST

    state_delta: State = Field(default_factory=dict)


class UpdateMemoryRequest(BaseModel):
    """The body of a memory update: the session to remember.

    Attributes:
        session_id: The user's session to add to memory.
    """

    model_config = ADK_REQUEST

    session_id: str = Field(pattern=ID_PATTERN)


def adk_actions(event: Event) -> dict[str, Any]:
    """The event's actions as ADK's EventActions serialise (its four maps always there)."""
    actions = event.actions
    out: dict[str, Any] = {
        "stateDelta": dict(event.state_delta),
        "artifactDelta": dict(actions.artifact_delta),
        "requestedAuthConfigs": {
            r["call_id"]: adk_auth_config(r.get("auth_config") or {})
            for r in event.credential_requests
        },
        "requestedToolConfirmations": {
            r["call_id"]: {
                "hint": r.get("hint", ""),
                "confirmed": False,
                "payload": r.get("payload"),
            }
            for r in event.confirmation_requests
        },
    }
    if actions.skip_summarization:
        out["skipSummarization"] = True
    if actions.transfer_to_agent:
        out["transferToAgent"] = actions.transfer_to_agent
    if actions.escalate:
        out["escalate"] = True
    return out


def adk_event(
    event: Event, long_running_tools: Collection[str], secret_names: Sequence[str]
) -> dict[str, Any]:
    """`event` as ADK's Event serialises: camelCase, None left out, a confirmation or a
    credential request as ADK's function call for it, its calls of long-running tools in
    `longRunningToolIds` (set on every event with calls, as ADK does), secrets masked."""
    shaped = with_credential_calls(with_confirmation_calls(event))
    out: dict[str, Any] = {}
    if shaped.content is not None:
        out["content"] = shaped.content.model_dump(mode="json", by_alias=True, exclude_none=True)
    out["invocationId"] = shaped.invocation_id
    out["author"] = shaped.author
    out["actions"] = adk_actions(event)
    calls = shaped.get_function_calls()
    if calls:
        ids = {c.id or "" for c in calls if c.name in long_running_tools}
        ids |= set(shaped.long_running_tool_ids or ())
        out["longRunningToolIds"] = sorted(ids)
    if shaped.branch:
        out["branch"] = shaped.branch
    if shaped.error:
        out["errorCode"] = "ERROR"
        out["errorMessage"] = shaped.error
    out["id"] = shaped.id
    out["timestamp"] = shaped.timestamp
    masked: dict[str, Any] = redact_deep(out, secret_names)
    return masked


def adk_session(
    session: Session,
    long_running_tools: Collection[str],
    secret_names: Sequence[str],
) -> dict[str, Any]:
    """`session` as ADK's Session serialises: id, appName, userId, state (secrets masked),
    events (less the one that stored its initial state), and lastUpdateTime (its last
    event's time, else 0)."""
    last = session.events[-1].timestamp if session.events else 0.0
    events = [e for e in session.events if not _initial_state(e)]
    return {
        "id": session.id,
        "appName": session.app_name,
        "userId": session.user_id,
        "state": redact_deep(session.state, secret_names),
        "events": [adk_event(e, long_running_tools, secret_names) for e in events],
        "lastUpdateTime": last,
    }


def _initial_state(event: Event) -> bool:
    """The event that stores a new session's initial state: ADK's sessions start with the
    state and no event."""
    return event.author == "user" and not event.invocation_id and event.content is None


def adk_artifact_version(version: ArtifactVersion, uri: str) -> dict[str, Any]:
    """One saved version as ADK's ArtifactVersion serialises; `uri` loads it."""
    out: dict[str, Any] = {
        "version": version.version,
        "canonicalUri": uri,
        "customMetadata": {},
        "createTime": version.saved_at,
    }
    # The store names no type for text; ADK's artifact services call a text part text/plain.
    out["mimeType"] = version.mime_type or "text/plain"
    return out
