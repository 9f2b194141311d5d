"""A session id is only found by its own user and app, through the Python API too (the
HTTP API answers 404 before it gets here): ADK's runner raises "Session not found"."""

from __future__ import annotations

import uuid

import pytest

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import ScriptedModel, say
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ForeignSessionError, SessionNotFoundError

pytestmark = pytest.mark.integration


async def test_a_user_cannot_run_another_users_session(settings: Settings) -> None:
    agent = Agent(name="diary", tools=[], model=ScriptedModel([say("noted"), say("noted")]))
    session_id = f"diary-{uuid.uuid4().hex}"
    async with Runner(agent, settings) as runner:
        assert await runner.ask(user_id="ann", session_id=session_id, message="my pin is 1234")
        with pytest.raises(ForeignSessionError) as refused:
            await runner.ask(user_id="bob", session_id=session_id, message="what is ann's pin?")
        assert isinstance(refused.value, SessionNotFoundError)  # not found, as in ADK
        assert "1234" not in str(refused.value)
        session = await runner.store.get(session_id)
        assert session.user_id == "ann"
        assert [e.author for e in session.events] == ["user", "diary"]  # bob's message not in
        assert await runner.leases.unleased([session_id]) == [session_id]  # no lease left held
        # Bob's own session of the same app works as ever.
        assert await runner.ask(user_id="bob", session_id=f"{session_id}-bob", message="hi")
