"""`{key}` placeholders in agent instructions, filled from session state as in ADK."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.shared.errors import ConfigError

# {name}, {user:name}, {app:name}, {temp:name}; a trailing ? makes it optional.
_PLACEHOLDER = re.compile(r"\{((?:app:|user:|temp:)?[A-Za-z_][A-Za-z0-9_]*)(\??)\}")


def render_instruction(agent: Agent, state: Mapping[str, Any]) -> str:
    """The agent's instruction with its `{key}` placeholders filled from session state.

    Non-string values are written as JSON; `{key?}` is empty when unset, and a missing
    `{key}` raises ConfigError.
    """

    def fill(match: re.Match[str]) -> str:
        key, optional = match.group(1), match.group(2) == "?"
        if key in state:
            value = state[key]
            return value if isinstance(value, str) else json.dumps(value, default=str)
        if optional:
            return ""
        raise ConfigError(
            f"the instruction of agent {agent.name!r} uses {{{key}}}, which is not in the "
            f"session state; set it first, or write {{{key}?}} to leave it empty when unset"
        )

    return _PLACEHOLDER.sub(fill, agent.instruction)


def identity_instruction(agent: Agent) -> str:
    """Who the model is, appended to every agent's instruction as ADK does: in a team the
    model needs its own name (transfers and other agents' turns refer to names)."""
    line = f'You are an agent. Your internal name is "{agent.name}".'
    if agent.description:
        line += f' The description about you is "{agent.description}".'
    return line
