"""`{key}` templating of agent instructions from session state."""

from __future__ import annotations

import pytest

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.instructions import identity_instruction, render_instruction
from toolfleet.shared.errors import ConfigError


def test_placeholders_are_filled_from_every_scope() -> None:
    agent = Agent(name="a", instruction="Hi {user:name}, theme {app:theme}, last {op}, {temp:x?}.")
    state = {"user:name": "Ann", "app:theme": "dark", "op": {"kind": "add"}}
    assert render_instruction(agent, state) == 'Hi Ann, theme dark, last {"kind": "add"}, .'


def test_missing_key_says_how_to_make_it_optional() -> None:
    agent = Agent(name="a", instruction="Known: {user:prefs}")
    with pytest.raises(ConfigError, match=r"uses \{user:prefs\}.*write \{user:prefs\?\}"):
        render_instruction(agent, {})


def test_other_braces_are_left_alone() -> None:
    agent = Agent(name="a", instruction='Answer as JSON like {"city": "Paris"} or { }.')
    assert render_instruction(agent, {}) == agent.instruction


def test_every_agent_is_told_its_name_as_adk_tells_it() -> None:
    plain = Agent(name="desk")
    assert identity_instruction(plain) == 'You are an agent. Your internal name is "desk".'
    described = Agent(name="desk", description="Answers the front desk.")
    assert identity_instruction(described).endswith(
        ' The description about you is "Answers the front desk.".'
    )
