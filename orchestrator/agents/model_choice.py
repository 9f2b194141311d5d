"""Pick the model for an agent: its own, Gemini with an API key, else the offline script.

An agent names its model as ADK's do: a Model object (a BaseLlm such as LiteLlm among
them), a Gemini model id string ("gemini-2.0-flash"), or nothing. Naming nothing, it
inherits an ancestor's BaseLlm; else a string, or nothing, needs an API key to reach
Gemini; without one the agent plays its offline script, and the startup line says so.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.models.base_llm import BaseLlm
from toolfleet.orchestrator.models.offline import ScriptedModel
from toolfleet.orchestrator.models.protocol import Model
from toolfleet.shared.config import Settings, gemini_api_key
from toolfleet.shared.errors import ConfigError

NO_KEY = "no GOOGLE_API_KEY/GEMINI_API_KEY set"
OFFLINE_MODELS = "TOOLFLEET_OFFLINE_MODELS"


_LOADED: dict[str, Mapping[str, Model]] = {}  # by spec: imported once per process


def offline_models(spec: str) -> Mapping[str, Model]:
    """The agent-name-to-Model mapping that `spec` ("module:attribute") names, imported
    once per process.

    Raises ConfigError naming what to change when it cannot be imported or is not one.
    """
    if spec in _LOADED:
        return _LOADED[spec]
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{OFFLINE_MODELS}={spec!r}: write it as module:attribute")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{OFFLINE_MODELS}={spec!r} cannot be imported: {exc}") from exc
    if not isinstance(found, Mapping) or not all(
        isinstance(name, str) and hasattr(model, "generate") for name, model in found.items()
    ):
        raise ConfigError(
            f"{OFFLINE_MODELS}={spec!r} must name a dict of agent name to Model "
            f"(e.g. ScriptedModel), not {type(found).__name__}"
        )
    _LOADED[spec] = found
    return found


def _offline_model_of(agent: Agent, settings: Settings) -> Model | None:
    if not settings.offline_models:
        return None
    return offline_models(settings.offline_models).get(agent.name)


def model_id(agent: Agent) -> str | None:
    """The Gemini model id the agent names, or inherits from its nearest ancestor naming
    one (as ADK's `model=""` does); None when no agent up the tree names one."""
    lineage: Agent | None = agent
    while lineage is not None:
        if isinstance(lineage.model, str) and lineage.model:
            return lineage.model
        if lineage.model is not None and not isinstance(lineage.model, str):
            return None  # a Model object is the agent's own, not inherited by sub-agents
        lineage = lineage.parent
    return None


def inherited_llm(agent: Agent) -> BaseLlm | None:
    """The BaseLlm (LiteLlm, a user's own) of the nearest ancestor naming a model, for an
    agent that names none: ADK's sub-agents inherit their parent's model object."""
    lineage = agent.parent
    while lineage is not None and not lineage.model:
        lineage = lineage.parent
    return lineage.model if lineage is not None and isinstance(lineage.model, BaseLlm) else None


def choose_model(agent: Agent, settings: Settings) -> Model:
    """The agent's own Model; else the BaseLlm an ancestor names; else the one
    TOOLFLEET_OFFLINE_MODELS maps its name to; else Gemini (the model id it names, or
    TOOLFLEET_MODEL) when an API key is set; else its offline script.

    Raises ConfigError when the agent has none of these.
    """
    if agent.model is not None and not isinstance(agent.model, str):
        return agent.model
    if not agent.model and (llm := inherited_llm(agent)) is not None:
        return llm
    if (offline := _offline_model_of(agent, settings)) is not None:
        return offline
    named = model_id(agent)
    if gemini_api_key():
        from toolfleet.orchestrator.models.gemini import GeminiModel  # imported only when used

        return GeminiModel(named or settings.model, timeout_s=settings.model_timeout_s)
    if agent.offline_script is None:
        wanted = f"model {named!r}" if named else "no model"
        raise ConfigError(
            f"agent {agent.name!r} has {wanted} and {NO_KEY}: set GOOGLE_API_KEY (or "
            "GEMINI_API_KEY) to use Gemini, give the agent an offline_script, or name a "
            "module:attribute dict of agent name to Model in TOOLFLEET_OFFLINE_MODELS"
        )
    return ScriptedModel(agent.offline_script)


def describe_choice(agent: Agent, model: Model) -> str:
    """One line saying which model runs the agent, and why (the CLI prints it at start)."""
    if model is agent.model:
        return f"model: {model.name} (the agent's own)"
    if not agent.model and model is inherited_llm(agent):
        return f"model: {model.name} (its parent's)"
    if any(model in loaded.values() for loaded in _LOADED.values()):
        return f"model: {model.name} ({OFFLINE_MODELS})"
    if isinstance(model, ScriptedModel):
        named = model_id(agent)
        instead = f"; the agent names {named!r}, which needs one" if named else ""
        return f"model: {model.name} ({NO_KEY}{instead})"
    if gemini_api_key():
        return f"model: Gemini {model.name} (API key from the environment)"
    return f"model: {model.name}"
