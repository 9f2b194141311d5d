"""Run a ported ADK example as `python -m examples.adk.<name>` would, on the offline
model: `python -m tests.integration.adk_example_run <name>`.

The example is untouched; the scripted model of its agent (below, by agent name) is
injected where toolfleet picks a model, as a Gemini API key would pick Gemini.
"""

from __future__ import annotations

import runpy
import sys
from typing import Any

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop import runner as fleet_runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, ScriptView, Step, call, say
from toolfleet.orchestrator.models.protocol import Model
from toolfleet.shared.config import Settings


def _after_approval(view: ScriptView) -> Step:
    if view.response("ask_for_approval").get("status") == "approved":
        return call(Call("reimburse", {"purpose": "meals", "amount": 200}))
    return say("The manager rejected your reimbursement of $200 for meals.")


def _waiting(view: ScriptView) -> Step:
    ticket = view.response("ask_for_approval")
    return say(
        f"Your $200 reimbursement is waiting for {ticket['approver']} ({ticket['ticket-id']})."
    )


MODELS: dict[str, ScriptedModel] = {
    "weather_sentiment_agent": ScriptedModel(
        [
            call(Call("get_weather_report", {"city": "London"})),
            lambda v: say(v.response("get_weather_report")["report"]),
        ]
    ),
    "reimbursement_agent": ScriptedModel(
        by_message={
            r"50\$": [
                call(Call("reimburse", {"purpose": "meals", "amount": 50})),
                say("Reimbursed $50 for meals: approved automatically."),
            ],
            r"200\$": [
                call(Call("ask_for_approval", {"purpose": "meals", "amount": 200})),
                _waiting,
                _after_approval,
                say("The manager approved: $200 for meals is reimbursed."),
            ],
        }
    ),
}


def scripted(agent: Agent, settings: Settings) -> Model:
    """The test's model for `agent`, instead of Gemini."""
    return MODELS[agent.name]


def main(argv: list[str]) -> None:
    """Run the example as its `__main__`, with the scripted models."""
    fleet_runner.choose_model = scripted  # type: ignore[assignment]
    module: Any = f"examples.adk.{argv[0]}"
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
