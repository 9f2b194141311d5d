"""What a model callback sees: the invocation's identity and the session's state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolfleet.orchestrator.models.base_llm import LlmResponse
from toolfleet.orchestrator.models.protocol import ModelRequest
from toolfleet.shared.state import State

# ADK's name for what a model is asked: toolfleet's ModelRequest (instruction, contents,
# tools); a before_model callback may change it in place. A BaseLlm gets it with the
# instruction and the function declarations in its config, as ADK's carries them.
LlmRequest = ModelRequest

__all__ = ["CallbackContext", "LlmRequest", "LlmResponse", "ToolCallError"]


class CallbackContext:
    """Passed to before/after model callbacks (and plugins' run callbacks), as ADK's.

    `state` is a snapshot of the session's state; what a callback writes is stored with
    the model's turn (as that event's state delta), so the next steps see it.

    Args:
        state: The session's state; copied into a State that records writes.
        agent_name: The agent whose model call it is.
        invocation_id: The invocation (one user message's run).
        session_id: The session's id, within its app and user.
        user_id: The session's user.
        app_name: The session's app.
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
    ) -> None:
        self.state = State(state)
        self.agent_name = agent_name
        self.invocation_id = invocation_id
        self.session_id = session_id
        self.user_id = user_id
        self.app_name = app_name


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
