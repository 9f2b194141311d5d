"""A session as read from the store: its events and its merged, scoped state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.genai import types

from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.keys import SessionKey, session_key


@dataclass
class Session:
    """A session as read from the store: its events and its state, all scopes merged.

    A snapshot: `SessionStore.append` updates it; others' writes need a new `get`.
    `id` is the user's name for it, unique only within its app and user; `key` names it
    everywhere inside (Redis keys, leases, the fleet's envelopes, cancellations).

    Attributes:
        id: The session's id, unique within its app and user.
        app_name: The app it belongs to.
        user_id: The user it belongs to.
        events: Its history, oldest first.
        state: Its state, all scopes merged.
        active_agent: The agent answering it after a transfer; None: the root agent.
    """

    id: str
    app_name: str
    user_id: str
    events: list[Event] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)

    active_agent: str | None = None  # the agent answering this session (after a transfer)
    key: SessionKey = field(init=False, repr=False, compare=False)
    # What `authored_contents` read so far: how many events, the last of them, and their
    # authors and contents (of those with content).
    _authored: tuple[int, Event | None, list[str], list[types.Content]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self.key = session_key(self.app_name, self.user_id, self.id)

    def contents(self) -> list[types.Content]:
        """The Contents of its events, in order (events without content left out)."""
        return [e.content for e in self.events if e.content is not None]

    def open_turn(self) -> Event | None:
        """The model's last turn, if some of its function calls have no response yet: its
        invocation died while they ran (or failed). Events without content after it
        (progress) do not hide it; a turn parked for a credential or a confirmation is
        not open."""
        answered: set[str] = set()
        for event in reversed(self.events):
            if event.credential_requests or event.confirmation_requests:
                return None  # parked: the user's credential or confirmation resumes it
            content = event.content
            if content is None:
                continue
            parts = content.parts or ()
            if content.role == "model":
                calls = [p.function_call.id for p in parts if p.function_call]
                return event if any(c not in answered for c in calls) else None
            answered |= {p.function_response.id or "" for p in parts if p.function_response}
        return None

    def authored_contents(self) -> tuple[list[str], list[types.Content]]:
        """(authors, contents) of the events with content, in order: a ModelRequest's pair.

        Events are only ever appended during an invocation, so each call reads only the
        events added since the last one (every model step asks: O(history) in Python per
        step was about 1% of a one-call turn of a ten-turn session); it starts over if
        the list was changed otherwise."""
        events = self.events
        seen, last, authors, contents = self._authored or (0, None, [], [])
        if seen > len(events) or (seen and events[seen - 1] is not last):
            seen, authors, contents = 0, [], []  # not appended to only: read it all
        for event in events[seen:]:
            if event.content is not None:
                authors.append(event.author)
                contents.append(event.content)
        self._authored = (len(events), events[-1] if events else None, authors, contents)
        return list(authors), list(contents)
