"""ADK's LlmAgent fields through toolfleet.adk's Runner, on real workers: the agent
callbacks, output_key and generate_content_config of one agent in one run."""

from __future__ import annotations

import pytest
import redis
from google.genai import types

from examples.reimbursement import reimburse
from toolfleet.adk import CallbackContext, LlmAgent, RedisSessionService, Runner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop import runner as fleet_runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, ScriptView, Step, call, say
from toolfleet.orchestrator.models.protocol import Model, text_of
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key

pytestmark = pytest.mark.integration


def _paid(view: ScriptView) -> Step:
    return say(f"Paid {view.response('reimburse')['paid']}.")


def count_visit(callback_context: CallbackContext) -> None:
    callback_context.state["visits"] = callback_context.state.get("visits", 0) + 1


async def sign(callback_context: CallbackContext) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text="-- payer")])


async def test_agent_callbacks_output_key_and_config_in_one_run_on_the_fleet(
    settings: Settings,
    fleet: WorkerGroup,
    orchestrator_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = ScriptedModel([call(Call("reimburse", {"purpose": "meals", "amount": 20})), _paid])

    def choose(agent: Agent, settings: Settings) -> Model:
        return model

    monkeypatch.setattr(fleet_runner, "choose_model", choose)
    agent = LlmAgent(
        name="payer",
        instruction="Pay for team {team}.",
        tools=[reimburse],
        generate_content_config=types.GenerateContentConfig(temperature=0.1),
        output_key="last_payment",
        before_agent_callback=count_visit,
        after_agent_callback=sign,
    )
    service = RedisSessionService(settings)
    session = await service.create_session(
        app_name="expenses", user_id="u1", state={"team": "infra"}
    )
    runner = Runner(agent=agent, app_name="expenses", session_service=service)
    ask = types.Content(role="user", parts=[types.Part(text="Reimburse 20$ for meals")])

    events = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=ask)
    ]

    assert [text_of(e.content) for e in events if e.content and text_of(e.content)] == [
        "Paid $20.00 for meals.",
        "-- payer",
    ]
    assert [r.config.temperature if r.config else None for r in model.requests] == [0.1, 0.1]
    assert model.requests[0].instruction.startswith("Pay for team infra.")
    stored = await service.get_session(app_name="expenses", user_id="u1", session_id=session.id)
    assert stored is not None
    assert stored.state["last_payment"] == "Paid $20.00 for meals."
    assert stored.state["visits"] == 1
    # The answer's write kept the lease for the after_agent_callback's event; the
    # invocation let it go once that was stored.
    client = redis.Redis.from_url(settings.require_redis_url())
    try:
        lease = Keys(settings.key_prefix).lease(session_key("expenses", "u1", session.id))
        assert not client.exists(lease)
    finally:
        client.close()
