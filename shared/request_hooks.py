"""What a tool's `process_llm_request` works with: ADK's hook on the model request.

Before each model call of an agent, the orchestrator calls the hook of every tool of
the agent that has one (ADK's load_artifacts, load_memory, preload_memory,
ExampleTool). These protocols are what the hook is given there, so a tool's module,
which the workers import too, needs nothing of the orchestrator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from google.genai import types

if TYPE_CHECKING:
    from toolfleet.shared.memory import SearchMemoryResponse


class RequestContext(Protocol):
    """ADK's ToolContext as a request hook sees it: the invocation, read-only, and its
    session's artifacts and its user's memory."""

    @property
    def agent_name(self) -> str:
        """The agent whose model call this is."""
        ...

    @property
    def invocation_id(self) -> str:
        """The invocation's id."""
        ...

    @property
    def session_id(self) -> str:
        """The session's id."""
        ...

    @property
    def app_name(self) -> str:
        """The session's app."""
        ...

    @property
    def user_id(self) -> str:
        """The session's user."""
        ...

    @property
    def state(self) -> Mapping[str, Any]:
        """The session's state (read-only)."""
        ...

    @property
    def user_content(self) -> types.Content | None:
        """The user's message that started this invocation (ADK's user_content)."""
        ...

    async def list_artifacts(self) -> list[str]:
        """Names of the session's and the user's artifacts."""
        ...

    async def load_artifact(self, filename: str, version: int | None = None) -> types.Part | None:
        """The latest (or given) version of an artifact, or None if there is none."""
        ...

    async def search_memory(self, query: str) -> SearchMemoryResponse:
        """Past events of the user's sessions that share a word with `query`."""
        ...


class LlmRequest(Protocol):
    """ADK's LlmRequest as a request hook may change it."""

    @property
    def contents(self) -> Sequence[types.Content]:
        """The contents sent, in order (the last one: the turn's responses, if any)."""
        ...

    def append_instructions(self, instructions: list[str]) -> None:
        """Add to the system instruction (each a paragraph of its own)."""
        ...

    def append_transient_content(self, content: types.Content) -> None:
        """Add a content after the conversation, for this model call only: it is not
        stored in the session."""
        ...


def text_of_content(content: types.Content | None, splitter: str = " ") -> str:
    """The text parts of `content`, thoughts left out, joined with `splitter` (ADK's
    extract_text_from_content)."""
    if content is None:
        return ""
    return splitter.join(p.text for p in content.parts or () if p.text and not p.thought)
