"""ADK's modules below toolfleet.adk: an ADK program's import lines move over by replacing
`google.adk` with `toolfleet.adk`."""

from __future__ import annotations

import importlib
import logging
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import toolfleet.adk
from toolfleet.orchestrator.adk.module_paths import ALIASES, adk_module_names
from toolfleet.orchestrator.adk.unsupported import NotPortedError

# An ADK program's import lines, as ADK's samples and documents write them.
ADK_PROGRAM = """
from google.adk.agents import Agent, LlmAgent, SequentialAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.events import Event
from google.adk.models import LlmRequest, LlmResponse
from google.adk.planners import BuiltInPlanner
from google.adk.runners import InMemoryRunner, Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import FunctionTool, LongRunningFunctionTool, exit_loop
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.load_memory_tool import load_memory_tool
from google.adk.tools.tool_context import ToolContext
import google.adk.tools.mcp_tool.mcp_toolset as mcp_toolset


def roll(sides: int, tool_context: ToolContext) -> dict:
    \"\"\"Roll a die.\"\"\"
    return {"rolled": 1}


def before_model(callback_context: CallbackContext, llm_request: LlmRequest):
    return None


helper = Agent(name="helper", model="gemini-2.5-flash", instruction="Help.")
root_agent = SequentialAgent(
    name="root",
    sub_agents=[
        LlmAgent(
            name="roller",
            model="gemini-2.5-flash",
            tools=[roll, AgentTool(agent=helper), load_memory_tool],
            before_model_callback=before_model,
        )
    ],
)
runner = InMemoryRunner(agent=root_agent, app_name="dice")
print(type(root_agent).__name__, type(runner).__name__, mcp_toolset.McpToolset.__name__)
"""


def test_every_adk_module_imports_with_its_names_as_toolfleet_adks() -> None:
    for module, names in adk_module_names().items():
        imported = importlib.import_module(f"toolfleet.adk.{module}")
        assert sorted(dir(imported)) == sorted(names), module
        for name in names:
            expected = getattr(toolfleet.adk, ALIASES.get(name, name))
            assert getattr(imported, name) is expected, f"{module}.{name}"


def test_an_adk_program_runs_with_google_adk_replaced_by_toolfleet_adk() -> None:
    """In an interpreter of its own: nothing imported toolfleet.adk before its imports."""
    program = textwrap.dedent(ADK_PROGRAM).replace("google.adk", "toolfleet.adk")
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["SequentialAgent", "InMemoryRunner", "McpToolset"]


def test_a_module_gives_only_what_adks_module_has() -> None:
    with pytest.raises(ImportError, match="cannot import name 'Runner'"):
        from toolfleet.adk.tools import Runner  # type: ignore[attr-defined]  # noqa: F401
    tools = importlib.import_module("toolfleet.adk.tools")
    with pytest.raises(AttributeError, match=r"toolfleet.adk.tools .* 'Runner'"):
        _ = tools.Runner
    with pytest.raises(ModuleNotFoundError, match=r"toolfleet\.adk\.tools\.toolbox_toolset"):
        importlib.import_module("toolfleet.adk.tools.toolbox_toolset")


def test_adks_modules_below_a_module_are_its_attributes() -> None:
    from toolfleet.adk.tools import load_memory_tool, tool_context

    assert tool_context is sys.modules["toolfleet.adk.tools.tool_context"]
    assert load_memory_tool.load_memory_tool is toolfleet.adk.load_memory
    assert toolfleet.adk.agents is sys.modules["toolfleet.adk.agents"]
    assert importlib.util.find_spec("toolfleet.adk.agents.llm_agent") is not None


def test_adks_older_names_are_the_same_objects() -> None:
    from toolfleet.adk.tools.mcp_tool import MCPToolset, SseConnectionParams

    assert MCPToolset is toolfleet.adk.MCPToolset is toolfleet.adk.McpToolset
    with pytest.raises(NotPortedError, match="StreamableHTTPConnectionParams"):
        SseConnectionParams(url="http://127.0.0.1:1/sse")


def test_adks_log_setup_sends_the_log_to_a_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`logs.log_to_tmp_folder()`, which ADK's sample programs call first."""
    from toolfleet.adk.cli.utils import logs

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        path = logs.log_to_tmp_folder(logging.DEBUG, log_file_prefix="dice")
        logging.getLogger("dice.agent").debug("rolled a six")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
            handler.close()
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
    assert Path(path).parent == tmp_path / "agents_log"
    assert "rolled a six" in Path(path).read_text()
    assert (tmp_path / "agents_log" / "dice.latest.log").resolve() == Path(path).resolve()
    assert path in capsys.readouterr().out
