"""ADK's view of toolfleet's events: the state writes in the event's actions."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.messages import ToolActions


class EventActions(ToolActions):
    """ADK's EventActions on the events a Runner yields and a session service returns:
    the tools' actions (`artifact_delta` among them) and the event's state writes
    (`state_delta`, which toolfleet's Event keeps beside them).

    Attributes:
        skip_summarization: The tools' responses are the answer; no model call follows.
        transfer_to_agent: The agent the conversation was handed to; None: none.
        escalate: The agent ended its LoopAgent.
        requested_auth: An AuthConfig as JSON: a call waits for a user's credential.
        requested_confirmation: A ToolConfirmation as JSON: a call waits for a person's
            yes or no.
        artifact_delta: Each artifact saved, by filename, and its new version.
        state_delta: The event's state writes.
    """

    state_delta: dict[str, Any] = Field(default_factory=dict)


def with_adk_actions(event: Event) -> Event:
    """`event` with its actions as ADK's EventActions (a copy; the store's is untouched)."""
    actions = EventActions(**event.actions.model_dump(), state_delta=event.state_delta)
    return event.model_copy(update={"actions": actions})
