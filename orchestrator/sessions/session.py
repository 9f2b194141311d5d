"""A session as read from the store: its events and its merged, scoped state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.genai import types

from toolfleet.orchestrator.sessions.events import Event


@dataclass
class Session:
    """A session as read from the store: its events and its state, all scopes merged.

    A snapshot: `SessionStore.append` updates it; others' writes need a new `get`.
    """

    id: str
    app_name: str
    user_id: str
    events: list[Event] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)

    active_agent: str | None = None  # the agent answering this session (after a transfer)

    def contents(self) -> list[types.Content]:
        """The Contents of its events, in order (events without content left out)."""
        return [e.content for e in self.events if e.content is not None]

    def open_turn(self) -> Event | None:
        """The last event, if it is a model turn whose function calls have no responses
        yet: its invocation died while the calls ran."""
        last = self.events[-1] if self.events else None
        if last is None or last.content is None or last.content.role != "model":
            return None
        if not any(p.function_call for p in last.content.parts or ()):
            return None
        return last

    def authored_contents(self) -> tuple[list[str], list[types.Content]]:
        """(authors, contents) of the events with content, in order: a ModelRequest's pair."""
        with_content = [e for e in self.events if e.content is not None]
        return [e.author for e in with_content], [e.content for e in with_content if e.content]
