"""What ADK's client is shown of an event that asks the user something."""

from __future__ import annotations

from typing import Any

from toolfleet.orchestrator.sessions.events import Event


def first_call_shown(shown: Event, name: str) -> dict[str, Any]:
    """The first function call of `shown` (an event as ADK's client gets it), which is a
    call of `name`, as JSON."""
    assert shown.content is not None and shown.content.parts
    request = shown.content.parts[0].function_call
    assert request is not None and request.name == name
    return request.model_dump(mode="json", exclude_none=True)
