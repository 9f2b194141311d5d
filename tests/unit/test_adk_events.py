"""ADK's Event fields on toolfleet's events: partial, turn_complete, branch, and the
state and artifact deltas in `actions`."""

from __future__ import annotations

import time

import fakeredis
from google.genai import types

from toolfleet.adk import Event, EventActions, ToolContext
from toolfleet.orchestrator.adk.events import with_adk_actions
from toolfleet.orchestrator.loop.turn import responses_event
from toolfleet.shared.artifacts import ArtifactStore
from toolfleet.shared.context import ToolServices
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus, ToolActions, ToolCall, ToolResult


def tool_call(call_id: str) -> ToolCall:
    return ToolCall(
        call_id=call_id, tool="save", args={}, session_id="s", app_name="a", user_id="u",
        invocation_id="i", agent="root", reply_to="r", dispatched_at=time.time(),
    )  # fmt: skip


def result(call_id: str, actions: ToolActions) -> ToolResult:
    return ToolResult(
        call_id=call_id, tool="save", session_id="s", invocation_id="i",
        status=CallStatus.SUCCESS, response={"ok": True}, actions=actions,
    )  # fmt: skip


def test_events_have_adks_streaming_fields_none_as_a_run_that_does_not_stream() -> None:
    event = Event(invocation_id="i", author="a", content=types.Content(parts=[]))
    assert (event.partial, event.turn_complete, event.branch) == (None, None, None)
    marked = event.model_copy(update={"partial": False, "turn_complete": True})
    assert {"partial", "turn_complete"}.isdisjoint(marked.model_dump())  # never stored


async def test_a_tools_saved_artifacts_are_the_response_events_artifact_delta() -> None:
    services = ToolServices(artifacts=ArtifactStore(fakeredis.FakeRedis(), Keys("t")))
    first = ToolContext(tool_call("c1"), services)
    part = types.Part(text="report")
    assert await first.save_artifact("report.txt", part) == 0
    assert await first.save_artifact("report.txt", part) == 1
    second = ToolContext(tool_call("c2"), services)
    await second.save_artifact("user:notes.txt", part)
    assert first.actions.artifact_delta == {"report.txt": 1}
    event = responses_event(
        "i", "root", [result("c1", first.actions), result("c2", second.actions)]
    )
    assert event.actions.artifact_delta == {"report.txt": 1, "user:notes.txt": 0}
    # Stored with the event, as its other actions are; read back the same.
    assert Event.model_validate_json(event.model_dump_json()).actions == event.actions


def test_adks_view_of_an_event_has_its_state_writes_in_its_actions() -> None:
    event = Event(
        invocation_id="i",
        author="a",
        state_delta={"k": 1},
        actions=ToolActions(escalate=True, artifact_delta={"f": 2}),
    )
    shaped = with_adk_actions(event)
    assert isinstance(shaped.actions, EventActions)
    assert (shaped.actions.state_delta, shaped.actions.artifact_delta) == ({"k": 1}, {"f": 2})
    assert shaped.actions.escalate and type(event.actions) is ToolActions  # a copy


def test_adks_view_leaves_flags_not_raised_none_and_carries_the_requests() -> None:
    """As ADK's EventActions: escalate and skip_summarization are None unless raised; a
    call waiting for a confirmation or a credential is in requested_tool_confirmations
    or requested_auth_configs under its id."""
    plain = with_adk_actions(Event(invocation_id="i", author="a"))
    assert (plain.actions.escalate, plain.actions.skip_summarization) == (None, None)
    assert plain.actions.model_dump(exclude_none=True) == {
        "artifact_delta": {},
        "state_delta": {},
        "requested_tool_confirmations": {},
        "requested_auth_configs": {},
    }
    waiting = Event(
        invocation_id="i",
        author="a",
        actions=ToolActions(escalate=True),
        confirmation_requests=[{"call_id": "c1", "tool": "pay", "hint": "Pay 5?"}],
        credential_requests=[{"call_id": "c2", "auth_config": {"key": "bank"}}],
    )
    actions = with_adk_actions(waiting).actions
    assert isinstance(actions, EventActions) and actions.escalate is True
    assert actions.requested_tool_confirmations["c1"].hint == "Pay 5?"
    assert set(actions.requested_auth_configs) == {"c2"}
    assert actions.requested_auth_configs["c2"]["credentialKey"] == "bank"
