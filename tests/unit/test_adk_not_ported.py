"""ADK's names that do not port import from toolfleet.adk as ADK programs import them, and
fail where they are used, naming what is not supported and what to use instead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from toolfleet import adk
from toolfleet.adk import (
    Agent,
    DatabaseSessionService,
    InMemorySessionService,
    LiveRequestQueue,
    NotPortedError,
    RemoteA2aAgent,
    Runner,
    SseConnectionParams,
    SseServerParams,
    VertexAiMemoryBankService,
    VertexAiRagMemoryService,
    VertexAiRagRetrieval,
    VertexAiSearchTool,
    VertexAiSessionService,
    to_a2a,
)
from toolfleet.shared.errors import ConfigError

AGENT = Agent(name="assistant", model="gemini-2.0-flash")

# Each use as ADK's documentation writes it, the name the error gives, and what it offers.
USES: dict[str, tuple[Callable[[], Any], str, str]] = {
    "live queue": (LiveRequestQueue, "LiveRequestQueue", "Runner.run_async"),
    "A2A agent": (
        lambda: RemoteA2aAgent(
            name="prime_agent", agent_card="http://localhost:8001/.well-known/agent-card.json"
        ),
        "RemoteA2aAgent",
        "toolfleet serve --agent module:attribute --http",
    ),
    "A2A app": (lambda: to_a2a(AGENT, port=8001), "to_a2a", "FunctionTool"),
    "Vertex sessions": (
        lambda: VertexAiSessionService(project="p", location="us-central1"),
        "VertexAiSessionService",
        "RedisSessionService(Settings())",
    ),
    "database sessions": (
        lambda: DatabaseSessionService(db_url="sqlite:///./sessions.db"),
        "DatabaseSessionService",
        "RedisSessionService(Settings())",
    ),
    "RAG memory": (
        lambda: VertexAiRagMemoryService(rag_corpus="projects/p/locations/l/ragCorpora/c"),
        "VertexAiRagMemoryService",
        "RedisMemoryService",
    ),
    "Memory Bank": (
        lambda: VertexAiMemoryBankService(project="p", location="l", agent_engine_id="1"),
        "VertexAiMemoryBankService",
        "RedisMemoryService",
    ),
    "search grounding": (
        lambda: VertexAiSearchTool(data_store_id="projects/p/dataStores/d"),
        "VertexAiSearchTool",
        "FunctionTool",
    ),
    "MCP over SSE": (
        lambda: SseConnectionParams(url="http://localhost:8090/sse"),
        "SseConnectionParams",
        "StreamableHTTPConnectionParams",
    ),
    "MCP over SSE, older name": (
        lambda: SseServerParams(url="http://localhost:8090/sse"),
        "SseServerParams",
        "StdioConnectionParams",
    ),
    "RAG retrieval": (
        lambda: VertexAiRagRetrieval(name="retrieve", description="docs", rag_resources=[]),
        "VertexAiRagRetrieval",
        "FunctionTool",
    ),
}


@pytest.mark.parametrize("use", sorted(USES))
def test_using_a_name_that_does_not_port_says_what_to_use_instead(use: str) -> None:
    build, name, instead = USES[use]
    with pytest.raises(NotPortedError) as raised:
        build()
    assert str(raised.value).startswith(f"{name}: ")
    assert "not supported by toolfleet" in str(raised.value)
    assert instead in str(raised.value)
    assert isinstance(raised.value, ConfigError)  # an operator's error: the program changes


def test_run_live_says_to_send_each_message_with_run_async() -> None:
    runner = Runner(agent=AGENT, app_name="live_app", session_service=InMemorySessionService())
    with pytest.raises(NotPortedError, match=r"^Runner\.run_live: .*Runner\.run_async"):
        runner.run_live(user_id="u", session_id="s", live_request_queue=None)


def test_every_name_that_does_not_port_is_listed_and_raises() -> None:
    not_ported = {n for n in adk.__all__ if getattr(adk, n).__module__.endswith(".adk.unsupported")}
    assert not_ported - {"NotPortedError"} == {name for _, name, _ in USES.values()}
