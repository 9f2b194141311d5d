"""What `toolfleet serve --http` says about ADK's routes and dev UI, and the agent graph
the dev UI draws."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli import main as cli
from toolfleet.orchestrator.httpapi import adk_dev_ui
from toolfleet.orchestrator.httpapi.adk_dev_ui import agent_graph


def lookup(city: str) -> str:
    """Looks a city up."""
    return city


def test_serve_names_the_adk_prefix_and_where_the_dev_ui_is_or_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(adk_dev_ui, "dev_ui_folder", lambda: None)
    line = cli.adk_line("http://127.0.0.1:8080")
    assert line.startswith("adk: http://127.0.0.1:8080/adk ")
    assert "pip install 'toolfleet[adk-web]'" in line
    monkeypatch.setattr(adk_dev_ui, "dev_ui_folder", lambda: tmp_path)
    assert "dev UI http://127.0.0.1:8080/dev-ui/" in cli.adk_line("http://127.0.0.1:8080")


def test_the_graph_lists_each_agent_with_its_model_instruction_tools_and_sub_agents() -> None:
    helper = Agent(name="helper", description="Helps.", model="gemini-2.0-flash")
    root = Agent(
        name="desk",
        instruction="Help at the desk.",
        tools=[lookup],
        sub_agents=[helper],
        model="gemini-2.0-flash",
    )
    graph = agent_graph(root)
    assert graph["name"] == "desk" and graph["instruction"] == "Help at the desk."
    assert graph["model"] == "gemini-2.0-flash"
    assert graph["tools"] == [{"name": "lookup", "type": "tool"}]
    (sub,) = graph["sub_agents"]
    assert (sub["name"], sub["description"], sub["sub_agents"]) == ("helper", "Helps.", [])
