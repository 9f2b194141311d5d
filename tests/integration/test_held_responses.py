"""A model that fails after its turn's results were held for the next write (loop/held.py):
a real Runner on a real Redis, the calls run in process."""

from __future__ import annotations

import uuid

import pytest

from tests.support import InProcessRunner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ModelError
from toolfleet.shared.keys import session_key

pytestmark = pytest.mark.integration


def add(a: int, b: int) -> int:
    """Adds.

    Args:
        a: First.
        b: Second.
    """
    return a + b


async def test_a_model_failing_after_the_results_keeps_them_and_the_session_owes_nothing(
    settings: Settings,
) -> None:
    """Given a turn whose results the model was given from memory, when the model then
    fails, then the responses are stored (the failure would repeat: nothing is owed, as
    when they were stored before the model was asked), and the lease is released."""
    one_step = ScriptedModel([call(Call("add", {"a": 1, "b": 2}))])  # no second step: fails
    agent = Agent(name="adder", tools=[add], model=one_step)
    session_id = f"held-{uuid.uuid4().hex}"
    async with Runner(agent, settings, tool_runner=InProcessRunner()) as runner:
        with pytest.raises(ModelError, match="step 2 was asked for"):
            await runner.ask(user_id="u", session_id=session_id, message="add")
        key = session_key("adder", "u", session_id)
        session = await runner.store.get(key)
        responses = [r.response for e in session.events for r in e.get_function_responses()]
        assert responses == [{"result": 3}]
        assert session.open_turn() is None
        assert key not in await runner.store.sessions_to_resume()
        assert await runner.leases.unleased([key]) == [key]
