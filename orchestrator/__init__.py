"""The orchestrator: the agent loop, models, dispatch, results, sessions, the CLI."""

from orchestrator.agent import Agent
from orchestrator.offline import Call, ScriptedModel, ScriptView, Step, call, say
from orchestrator.runner import Runner

__all__ = ["Agent", "Call", "Runner", "ScriptView", "ScriptedModel", "Step", "call", "say"]
