"""Small pieces several commands share."""

from __future__ import annotations

from orchestrator.agent import Agent
from shared.config import Settings, gemini_api_key


def describe_model(agent: Agent, settings: Settings, model_name: str) -> str:
    """One line saying which model runs, and why."""
    if gemini_api_key() and agent.model is None:
        return f"model: Gemini {settings.model} (API key from the environment)"
    return f"model: {model_name} (no GOOGLE_API_KEY/GEMINI_API_KEY set)"
