"""ADK's view of toolfleet's events: the state writes in the event's actions."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from toolfleet.orchestrator.adkwire.confirming import requested_confirmation
from toolfleet.orchestrator.adkwire.credentials import adk_auth_config
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.confirmation import ToolConfirmation
from toolfleet.shared.messages import ToolActions


class EventActions(ToolActions):
    """ADK's EventActions on the events a Runner yields and a session service returns:
    the tools' actions (`artifact_delta` among them) and the event's state writes
    (`state_delta`, which toolfleet's Event keeps beside them).

    Attributes:
        skip_summarization: True: the tools' responses are the answer, no model call
            follows; None (as ADK) otherwise.
        transfer_to_agent: The agent the conversation was handed to; None: none.
        escalate: True: the agent ended its LoopAgent; None (as ADK) otherwise.
        requested_auth: An AuthConfig as JSON: a call waits for a user's credential.
        requested_confirmation: A ToolConfirmation as JSON: a call waits for a person's
            yes or no.
        artifact_delta: Each artifact saved, by filename, and its new version.
        state_delta: The event's state writes.
        requested_tool_confirmations: The calls that wait for a person's confirmation, by
            call id, as ADK's event carries them.
        requested_auth_configs: The calls that wait for a user's credential, by call id:
            ADK's AuthConfig, as JSON.
    """

    skip_summarization: bool | None = None  # type: ignore[assignment]
    escalate: bool | None = None  # type: ignore[assignment]
    state_delta: dict[str, Any] = Field(default_factory=dict)
    requested_tool_confirmations: dict[str, ToolConfirmation] = Field(default_factory=dict)
    requested_auth_configs: dict[str, dict[str, Any]] = Field(default_factory=dict)


def with_adk_actions(event: Event) -> Event:
    """`event` with its actions as ADK's EventActions (a copy; the store's is untouched)."""
    fields = event.actions.model_dump()
    for flag in ("skip_summarization", "escalate"):
        fields[flag] = fields[flag] or None  # ADK leaves a flag not raised None
    confirmations = {r["call_id"]: requested_confirmation(r) for r in event.confirmation_requests}
    auth = {
        r["call_id"]: adk_auth_config(r.get("auth_config") or {}) for r in event.credential_requests
    }
    actions = EventActions(
        **fields,
        state_delta=event.state_delta,
        requested_tool_confirmations=confirmations,
        requested_auth_configs=auth,
    )
    return event.model_copy(update={"actions": actions})
