"""What a model callback sees: the invocation's identity and the session's state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any, Protocol

from google.genai import types

from toolfleet.orchestrator.models.base_llm import LlmResponse
from toolfleet.orchestrator.models.protocol import ModelRequest
from toolfleet.shared.errors import SessionNotFoundError
from toolfleet.shared.keys import SessionKey, session_key
from toolfleet.shared.state import State

# ADK's name for what a model is asked: toolfleet's ModelRequest (instruction, contents,
# tools); a before_model callback may change it in place. A BaseLlm gets it with the
# instruction and the function declarations in its config, as ADK's carries them.
LlmRequest = ModelRequest

__all__ = ["CallbackContext", "LlmRequest", "LlmResponse", "ToolCallError"]


class StoredSessions(Protocol):
    """Where a callback's context reads sessions as stored (the replica's SessionStore)."""

    async def get(self, key: SessionKey) -> Any: ...


class CallbackContext:
    """Passed to agent and model callbacks (and plugins' run callbacks), as ADK's.

    `state` is a snapshot of the session's state; what a callback writes is stored with
    the model's turn (as that event's state delta), so the next steps see it. `session`
    is the session as the callback sees it (its state with the callback's writes), and
    `user_content` the message that started the invocation.

    Args:
        state: The session's state; copied into a State that records writes.
        agent_name: The agent whose model call it is.
        invocation_id: The invocation (one user message's run).
        session_id: The session's id, within its app and user.
        user_id: The session's user.
        app_name: The session's app.
        events: The session's events so far (the invocation's user message among them).
        stored: Where the session is read as stored; None: not reachable here.
    """

    def __init__(
        self,
        state: Mapping[str, Any],
        *,
        agent_name: str,
        invocation_id: str,
        session_id: str,
        user_id: str,
        app_name: str,
        events: Sequence[Any] = (),
        stored: StoredSessions | None = None,
    ) -> None:
        self.state = State(state)
        self.agent_name = agent_name
        self.invocation_id = invocation_id
        self.session_id = session_id
        self.user_id = user_id
        self.app_name = app_name
        self._events = events
        self._stored = stored

    @property
    def user_content(self) -> types.Content | None:
        """The user's message that started this invocation, as ADK's context has it."""
        for event in reversed(self._events):
            if event.author == "user" and event.invocation_id == self.invocation_id:
                content: types.Content | None = event.content
                return content
        return None

    @property
    def session(self) -> SimpleNamespace:
        """The session as this callback sees it: its id, app, user, events, and `state`
        with what the callbacks wrote so far (not stored yet)."""
        return SimpleNamespace(
            id=self.session_id,
            app_name=self.app_name,
            user_id=self.user_id,
            state=self.state,
            events=list(self._events),
        )

    @property
    def _invocation_context(self) -> SimpleNamespace:
        """ADK's private invocation context, as ADK's samples reach into it: the session
        as seen here, a `session_service` whose `get_session` reads it as stored, and
        the invocation's identity."""
        return SimpleNamespace(
            invocation_id=self.invocation_id,
            agent_name=self.agent_name,
            app_name=self.app_name,
            user_id=self.user_id,
            user_content=self.user_content,
            session=self.session,
            session_service=_StoredSessionReader(self._stored),
        )


class _StoredSessionReader:
    """ADK's session service as a callback reaches it: `get_session` reads what is
    stored (a callback's writes are not, until the event carrying them is)."""

    def __init__(self, stored: StoredSessions | None) -> None:
        self._stored = stored

    async def get_session(
        self, *, app_name: str, user_id: str, session_id: str, config: Any = None
    ) -> Any:
        """The session as stored; None if there is none."""
        if self._stored is None:
            raise RuntimeError("this callback's context reads no stored sessions")
        try:
            return await self._stored.get(session_key(app_name, user_id, session_id))
        except SessionNotFoundError:
            return None


class ToolCallError(Exception):
    """A call's error response, as the exception on_tool_error callbacks receive (the
    tool raised on a worker; only its type name and message crossed over).

    Args:
        error_type: The name of the exception's type the tool raised.
        error_message: Its message.
        response: The error response the model would get.
    """

    def __init__(self, error_type: str, error_message: str, response: dict[str, Any]) -> None:
        super().__init__(f"{error_type}: {error_message}")
        self.error_type = error_type
        self.error_message = error_message
        self.response = response
