"""ADK's names that do not port to toolfleet, under ADK's names.

An ADK program whose import lines were changed to `toolfleet.adk` imports these as it
did; using one (building it, calling it) raises NotPortedError naming what is not
supported and what to use instead, rather than an ImportError at the top of the file.
"""

from __future__ import annotations

from typing import Any, NoReturn

from toolfleet.shared.errors import ConfigError

LIVE = (
    "ADK's live (bidirectional) streaming - Runner.run_live and LiveRequestQueue - is not "
    "supported by toolfleet: send each message with Runner.run_async (or run), which yields "
    "the invocation's events as they come"
)
A2A = (
    "is not supported by toolfleet (no A2A protocol): to offer an agent to other programs, "
    "serve it with `toolfleet serve --agent module:attribute --http` (the HTTP API); to use "
    "an agent another program serves, call it from a FunctionTool"
)
SESSIONS = (
    "use InMemorySessionService (this machine; a private server unless TOOLFLEET_REDIS_URL is "
    "set) or RedisSessionService(Settings()) (the fleet's Redis, sessions that persist)"
)
MEMORY = "use RedisMemoryService (or InMemoryMemoryService, the same on the fleet's Redis)"
GROUNDING = (
    "is not supported by toolfleet (Vertex AI only): search from a FunctionTool of your own, "
    "which runs on the workers"
)

MCP_SSE = (
    "MCP over SSE is not supported by toolfleet: connect with StreamableHTTPConnectionParams "
    "(streamable HTTP, which replaced SSE in MCP) or StdioConnectionParams"
)


class NotPortedError(ConfigError):
    """An ADK feature toolfleet does not have; the message says what to use instead."""


class _NotPorted:
    """Raises NotPortedError when built: `_why` says what to use instead."""

    _why = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotPortedError(f"{type(self).__name__}: {self._why}")


class LiveRequestQueue(_NotPorted):
    """ADK's queue of a live session's input: not supported (see LIVE)."""

    _why = LIVE


def run_live(*args: Any, **kwargs: Any) -> NoReturn:
    """ADK's `Runner.run_live`: not supported (see LIVE)."""
    raise NotPortedError(f"Runner.run_live: {LIVE}")


class RemoteA2aAgent(_NotPorted):
    """ADK's agent served elsewhere over A2A: not supported."""

    _why = f"an agent over A2A {A2A}"


def to_a2a(*args: Any, **kwargs: Any) -> NoReturn:
    """ADK's A2A app of an agent: not supported."""
    raise NotPortedError(f"to_a2a: serving an agent over A2A {A2A}")


class VertexAiSessionService(_NotPorted):
    """ADK's sessions on Vertex AI Agent Engine: cloud-only."""

    _why = f"sessions on Vertex AI Agent Engine are not supported by toolfleet: {SESSIONS}"


class DatabaseSessionService(_NotPorted):
    """ADK's sessions in an SQL database: not supported."""

    _why = f"sessions in an SQL database are not supported by toolfleet: {SESSIONS}"


class VertexAiRagMemoryService(_NotPorted):
    """ADK's memory in a Vertex AI RAG corpus: cloud-only."""

    _why = f"memory in a Vertex AI RAG corpus is not supported by toolfleet: {MEMORY}"


class VertexAiMemoryBankService(_NotPorted):
    """ADK's memory in Vertex AI Agent Engine's Memory Bank: cloud-only."""

    _why = f"Vertex AI Agent Engine's Memory Bank is not supported by toolfleet: {MEMORY}"


class VertexAiSearchTool(_NotPorted):
    """ADK's Vertex AI Search grounding: cloud-only."""

    _why = f"Vertex AI Search grounding {GROUNDING}"


class VertexAiRagRetrieval(_NotPorted):
    """ADK's retrieval from a Vertex AI RAG corpus: cloud-only."""

    _why = f"retrieval from a Vertex AI RAG corpus {GROUNDING}"


class SseConnectionParams(_NotPorted):
    """ADK's MCP connection over SSE: not supported (see MCP_SSE)."""

    _why = MCP_SSE


class SseServerParams(_NotPorted):
    """ADK's older name of an MCP connection over SSE: not supported (see MCP_SSE)."""

    _why = MCP_SSE


def refuse_unported_run_args(*, invocation_id: str | None, abort_signal: object) -> None:
    """Raise NotPortedError for ADK's `Runner.run_async` arguments toolfleet does not
    take: resuming an invocation by its id, and an abort signal."""
    if invocation_id is not None:
        raise NotPortedError(
            "Runner.run_async(invocation_id=...): resuming an invocation by its id is not "
            "needed on toolfleet - an invocation waiting on calls goes on by itself once "
            "they are answered; send a call's result as a FunctionResponse message"
        )
    if abort_signal is not None:
        raise NotPortedError(
            "Runner.run_async(abort_signal=...) is not supported by toolfleet: stop a run "
            "with `toolfleet cancel <session>` or the HTTP API's cancel, which stops its "
            "calls on the workers too"
        )
