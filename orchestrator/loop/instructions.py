"""`{key}` placeholders in agent instructions, filled from session state as in ADK."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Mapping
from typing import Any

from toolfleet.orchestrator.agents.agent import Agent, InstructionProvider
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.toolsets import ReadonlyContext

# {name}, {user:name}, {app:name}, {temp:name}; a trailing ? makes it optional.
_PLACEHOLDER = re.compile(r"\{((?:app:|user:|temp:)?[A-Za-z_][A-Za-z0-9_]*)(\??)\}")


async def resolved(
    agent: Agent, instruction: str | InstructionProvider, context: ReadonlyContext
) -> str:
    """An instruction as ADK makes it: a string has its `{key}` placeholders filled; a
    provider (sync or async) is called with the context and its text used as it is."""
    if isinstance(instruction, str):
        return render_instruction(agent, context.state, instruction)
    text = instruction(context)
    if inspect.isawaitable(text):
        text = await text
    if not isinstance(text, str):
        raise ConfigError(
            f"an instruction provider of agent {agent.name!r} returned "
            f"{type(text).__name__}: it must return a str"
        )
    return text


def render_instruction(agent: Agent, state: Mapping[str, Any], template: str | None = None) -> str:
    """`template` (the agent's instruction if None) with its `{key}` placeholders filled
    from session state.

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

    if template is None:
        if not isinstance(agent.instruction, str):
            raise ConfigError(f"agent {agent.name!r}: its instruction is a provider")
        template = agent.instruction
    return _PLACEHOLDER.sub(fill, template)


def identity_instruction(agent: Agent) -> str:
    """Who the model is, appended to every agent's instruction as ADK does: in a team the
    model needs its own name (transfers and other agents' turns refer to names)."""
    line = f'You are an agent. Your internal name is "{agent.name}".'
    if agent.description:
        line += f' The description about you is "{agent.description}".'
    return line
