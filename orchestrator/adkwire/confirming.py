"""ADK's wire format for confirmations: a waiting call is shown to ADK's client as an
`adk_request_confirmation` function call, and the client's function response to it is
the person's answer."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from google.genai import types
from pydantic import TypeAdapter, ValidationError

from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.completions import UNCHANGED
from toolfleet.shared.confirmation import (
    REQUEST_CONFIRMATION,
    ToolConfirmation,
    confirmation_call_id,
    confirmed_request,
)
from toolfleet.shared.messages import ToolActions

# `confirmed` read as ADK's ToolConfirmation reads it: true, false, "yes", "no", 1, 0...;
# any other value is no answer (Python's truth would take "false" for a yes).
_CONFIRMED: TypeAdapter[bool] = TypeAdapter(bool)


class ConfirmationAnswer(NamedTuple):
    """A person's answer to one `adk_request_confirmation` call: the waiting call, the
    question it answers (the call's `asked_again` then), yes or no, and the payload as
    they edited it (UNCHANGED: as asked)."""

    call_id: str
    asked: int
    confirmed: bool
    payload: Any


def shows_adk_client(event: Event) -> bool:
    """Whether ADK's Runner yields `event` (the user's and completions' aside): it has
    content, state writes (a callback's alone too), an escalation or a request for the
    user."""
    return bool(
        event.content
        or event.state_delta
        or event.actions.escalate
        or event.confirmation_requests
        or event.credential_requests
    )


def with_confirmation_calls(event: Event) -> Event:
    """`event` as ADK's client sees it: one `adk_request_confirmation` call per call
    that waits for a confirmation (ids in long_running_tool_ids, as ADK marks them)."""
    if not event.confirmation_requests:
        return event
    calls = [
        types.FunctionCall(
            id=confirmation_call_id(request["call_id"], request.get("asked_again", 0)),
            name=REQUEST_CONFIRMATION,
            args={
                "originalFunctionCall": {
                    "id": request["call_id"],
                    "name": request["tool"],
                    "args": request.get("args", {}),
                },
                # As ADK dumps it: a payload of None is left out.
                "toolConfirmation": requested_confirmation(request).model_dump(
                    mode="json", exclude_none=True
                ),
            },
        )
        for request in event.confirmation_requests
    ]
    return asking(event, calls)


def requested_confirmation(request: dict[str, Any]) -> ToolConfirmation:
    """The ToolConfirmation a call waiting for a person asks for (one of an event's
    `confirmation_requests`): its hint and payload, not answered yet."""
    return ToolConfirmation(hint=request.get("hint", ""), payload=request.get("payload"))


def asking(event: Event, calls: list[types.FunctionCall]) -> Event:
    """`event` as ADK shows a request to the user: its content these calls, each marked
    long-running (ADK pauses on them until the client answers)."""
    content = types.Content(role="model", parts=[types.Part(function_call=c) for c in calls])
    ids = {c.id or "" for c in calls}
    return event.model_copy(update={"content": content, "long_running_tool_ids": ids})


def confirmation_answer(response: types.FunctionResponse) -> ConfirmationAnswer | None:
    """The person's answer when `response` answers an `adk_request_confirmation` call;
    None for any other response. It names its question by the call's id: a question
    asked again has an id of its own.

    Raises:
        ValueError: The response carries no id of a request, or its `confirmed` is
            neither a yes nor a no."""
    if response.name != REQUEST_CONFIRMATION:
        return None
    answer = _unwrapped(response.id, dict(response.response or {}))
    requested = confirmed_request(response.id or "")
    if requested is None:
        raise ValueError(
            f"a response to {REQUEST_CONFIRMATION} must carry the id of the call it answers "
            f"(it starts with 'adk-confirm-'), not {response.id!r}"
        )
    try:
        confirmed = _CONFIRMED.validate_python(answer.get("confirmed", False))
    except ValidationError:
        raise ValueError(
            f"the response to {REQUEST_CONFIRMATION} {response.id!r} says neither yes nor no: "
            "its `confirmed` must be true or false"
        ) from None
    call_id, asked = requested
    return ConfirmationAnswer(call_id, asked, confirmed, answer.get("payload", UNCHANGED))


def _unwrapped(response_id: str | None, answer: dict[str, Any]) -> dict[str, Any]:
    """The confirmation `answer` holds: ADK's client (its dev UI) sends it as the JSON
    text of a ToolConfirmation under the one key `response`, as ADK reads it too.

    Raises:
        ValueError: That text is not the JSON of an object."""
    if len(answer) != 1 or "response" not in answer:
        return answer
    text = answer["response"]
    try:
        # Too deep for the parser is refused like any other text that is no object.
        unwrapped = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        unwrapped = None
    if not isinstance(unwrapped, dict):
        raise ValueError(
            f"the response to {REQUEST_CONFIRMATION} {response_id!r} wraps no confirmation: "
            "its `response` must be the JSON text of an object such as "
            '{"confirmed": true}'
        )
    return unwrapped


# ADK's response to a call held back for a confirmation, as its clients see it.
HELD_BACK = {"error": "This tool call requires confirmation, please approve or reject."}


def held_back_responses(event: Event) -> Event | None:
    """What ADK shows after asking to confirm calls it held back (require_confirmation):
    their error responses, which end the run until the answer (skip_summarization). None
    when `event` holds back no call. Shown only: the model gets the call's response once
    it runs."""
    held = [r for r in event.confirmation_requests if r.get("held_back")]
    if not held:
        return None
    parts = [
        types.Part(
            function_response=types.FunctionResponse(
                id=r["call_id"], name=r["tool"], response=dict(HELD_BACK)
            )
        )
        for r in held
    ]
    return Event(
        invocation_id=event.invocation_id,
        author=event.author,
        timestamp=event.timestamp,
        content=types.Content(role="user", parts=parts),
        actions=ToolActions(skip_summarization=True),
    )
