"""Model choice: ADK's model id strings, the offline fallback, and the startup line."""

from __future__ import annotations

import pytest

from toolfleet.orchestrator.agent_tool import AgentTool
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.model_choice import choose_model, describe_choice
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.gemini import GeminiModel
from toolfleet.orchestrator.models.offline import ScriptedModel, say
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError

SETTINGS = Settings(redis_url="redis://127.0.0.1:1/0")  # never connected to here


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")


def adk_agent(**fields: object) -> Agent:
    return Agent(name="weather", model="gemini-2.0-flash", **fields)  # type: ignore[arg-type]


def test_a_model_id_with_an_api_key_runs_that_gemini_model(key: None) -> None:
    agent = adk_agent()
    model = choose_model(agent, SETTINGS)
    assert isinstance(model, GeminiModel) and model.name == "gemini-2.0-flash"
    assert describe_choice(agent, model) == (
        "model: Gemini gemini-2.0-flash (API key from the environment)"
    )


def test_a_model_id_without_a_key_plays_the_offline_script_and_says_why(no_key: None) -> None:
    agent = adk_agent(offline_script=[say("hi")])
    model = choose_model(agent, SETTINGS)
    assert isinstance(model, ScriptedModel)
    line = describe_choice(agent, model)
    assert line.startswith("model: offline scripted model (no GOOGLE_API_KEY/GEMINI_API_KEY set")
    assert "'gemini-2.0-flash'" in line


def test_a_model_id_without_a_key_or_script_is_a_config_error_naming_both(no_key: None) -> None:
    with pytest.raises(
        ConfigError, match=r"model 'gemini-2\.0-flash'.*offline_script.*TOOLFLEET_OFFLINE_MODELS"
    ):
        choose_model(adk_agent(), SETTINGS)


def test_an_agents_own_model_is_never_described_as_missing_a_key(key: None) -> None:
    own = ScriptedModel([say("hi")])
    agent = Agent(name="a", model=own)
    assert choose_model(agent, SETTINGS) is own
    line = describe_choice(agent, own)
    assert line == "model: offline scripted model (the agent's own)"
    assert "GOOGLE_API_KEY" not in line


def test_no_model_keeps_the_default_gemini_and_the_offline_line(
    key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = Agent(name="a", offline_script=[say("hi")])
    model = choose_model(agent, SETTINGS)
    assert isinstance(model, GeminiModel) and model.name == SETTINGS.model
    monkeypatch.delenv("GOOGLE_API_KEY")
    offline = choose_model(agent, SETTINGS)
    assert describe_choice(agent, offline) == (
        "model: offline scripted model (no GOOGLE_API_KEY/GEMINI_API_KEY set)"
    )


def test_sub_agents_inherit_the_model_id_as_in_adk(key: None) -> None:
    child = Agent(name="child")
    scripted = Agent(name="scripted", model=ScriptedModel([say("x")]), sub_agents=[])
    Agent(name="root", model="gemini-2.0-flash", sub_agents=[child, scripted])
    model = choose_model(child, SETTINGS)
    assert isinstance(model, GeminiModel) and model.name == "gemini-2.0-flash"


def test_a_model_that_is_neither_an_id_nor_a_model_is_refused() -> None:
    with pytest.raises(TypeError, match="Gemini model id"):
        Agent(name="a", model=42)  # type: ignore[arg-type]


def test_the_runner_and_an_agent_tools_agent_take_model_ids(no_key: None) -> None:
    child = Agent(name="helper", model="gemini-2.0-flash", offline_script=[say("done")])
    parent = Agent(
        name="parent",
        model="gemini-2.0-flash",
        tools=[AgentTool(agent=child, skip_summarization=False)],
        offline_script=[say("ok")],
    )
    runner = Runner(parent, SETTINGS)  # connects on entry only
    assert isinstance(runner.model, ScriptedModel)
    assert isinstance(runner.model_for(child), ScriptedModel)
    assert isinstance(Runner(child, SETTINGS).model, ScriptedModel)  # as a worker runs it


OFFLINE = ScriptedModel([say("offline")])
MODELS = {"weather": OFFLINE}


def test_offline_models_named_in_settings_come_before_an_api_key(key: None) -> None:
    settings = SETTINGS.model_copy(update={"offline_models": f"{__name__}:MODELS"})
    agent = adk_agent()
    assert choose_model(agent, settings) is OFFLINE
    assert describe_choice(agent, OFFLINE) == (
        "model: offline scripted model (TOOLFLEET_OFFLINE_MODELS)"
    )
    # An agent the mapping does not name is chosen for as before.
    assert isinstance(
        choose_model(Agent(name="other", model="gemini-2.0-flash"), settings), GeminiModel
    )


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_colon", "write it as module:attribute"),
        ("no.such.module:MODELS", "cannot be imported"),
        (f"{__name__}:SETTINGS", "must name a dict of agent name to Model"),
    ],
)
def test_a_wrong_offline_models_setting_says_what_to_change(spec: str, says: str) -> None:
    settings = SETTINGS.model_copy(update={"offline_models": spec})
    with pytest.raises(ConfigError, match=says):
        choose_model(adk_agent(), settings)
