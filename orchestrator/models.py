"""Pick the model for an agent: Gemini with an API key, else the offline script."""

from __future__ import annotations

from orchestrator.agent import Agent
from orchestrator.model import Model
from orchestrator.offline import ScriptedModel
from shared.config import Settings, gemini_api_key
from shared.errors import ConfigError


def choose_model(agent: Agent, settings: Settings) -> Model:
    if agent.model is not None:
        return agent.model
    if gemini_api_key():
        from orchestrator.gemini import GeminiModel  # imported only when used

        return GeminiModel(settings.model)
    if agent.offline_script is None:
        raise ConfigError(
            f"agent {agent.name!r} has no model: set GOOGLE_API_KEY (or GEMINI_API_KEY) to use "
            "Gemini, or give the agent an offline_script"
        )
    return ScriptedModel(agent.offline_script)
