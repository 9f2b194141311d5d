"""Posting and applying completions against what a careless or hostile poster sends:
another user's calls, oversized or repeated posts, and what they leave in Redis."""

from __future__ import annotations

import time
from typing import Any

import fakeredis
import pytest

from toolfleet.orchestrator.mcpserve.final_results import FinalResults
from toolfleet.shared.completions import Completions
from toolfleet.shared.confirmation import SERVED_AGENT
from toolfleet.shared.keys import Keys, SessionKey, session_key
from toolfleet.shared.messages import PendingCall

KEYS = Keys("t")
MINE = session_key("app", "mcp", "mcp-r1")  # a session `toolfleet mcp serve` made


def call(call_id: str, session: SessionKey = MINE, **update: Any) -> PendingCall:
    app, user, session_id = session.split("/")
    fields: dict[str, Any] = {
        "call_id": call_id, "tool": "open_ticket", "session_id": session_id,
        "app_name": app, "user_id": user, "agent": SERVED_AGENT, "invocation_id": "i",
        "ticket": {"status": "pending"}, "created_at": time.time(),
    }  # fmt: skip
    return PendingCall(**(fields | update))


@pytest.mark.parametrize("kind", ["result", "confirmation"])
def test_a_served_call_of_another_user_is_unknown_to_toolfleet_result(kind: str) -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    theirs = session_key("app", "ann", "mcp-r2")  # a server running as user `ann`
    assert completions.register(call("c1", theirs, kind=kind, ticket={"hint": "ok?"}))
    if kind == "result":
        completions.post_result("c1", {"secret": "for ann only"})
    else:
        completions.confirm("c1", True)
    results = FinalResults(client, KEYS, completions, "app", "mcp")

    fetched = results.fetch("c1")

    assert fetched == {
        "status": "error",
        "error_type": "UnknownCall",
        "error_message": "no pending call with id 'c1'",
    }
    assert completions.find("c1") is not None  # still ann's to fetch
    assert completions.waiting(completions.get("c1"))


def test_a_served_call_of_this_user_is_handed_over() -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    assert completions.register(call("c1"))
    completions.post_result("c1", {"answer": 42})
    results = FinalResults(client, KEYS, completions, "app", "mcp")

    assert results.fetch("c1") == {"answer": 42}
    assert completions.find("c1") is None
