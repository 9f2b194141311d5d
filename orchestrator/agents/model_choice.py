"""Pick the model for an agent: Gemini with an API key, else the offline script."""

from __future__ import annotations

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.offline import ScriptedModel
from toolfleet.orchestrator.models.protocol import Model
from toolfleet.shared.config import Settings, gemini_api_key
from toolfleet.shared.errors import ConfigError


def choose_model(agent: Agent, settings: Settings) -> Model:
    """The agent's own model, else Gemini when an API key is set, else its offline script.

    Raises ConfigError when the agent has none of these.
    """
    if agent.model is not None:
        return agent.model
    if gemini_api_key():
        from toolfleet.orchestrator.models.gemini import GeminiModel  # imported only when used

        return GeminiModel(settings.model, timeout_s=settings.model_timeout_s)
    if agent.offline_script is None:
        raise ConfigError(
            f"agent {agent.name!r} has no model: set GOOGLE_API_KEY (or GEMINI_API_KEY) to use "
            "Gemini, or give the agent an offline_script"
        )
    return ScriptedModel(agent.offline_script)
