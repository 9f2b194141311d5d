"""Record what google-adk prints for the programs of examples/adk_programs.

    /path/to/adk-venv/bin/python tests/integration/adk_program_record.py [PROGRAM...]

Run from the repository root with a Python that has google-adk installed (toolfleet's
own dependencies are not needed). The programs import `toolfleet.adk`; here that name
is a module of google.adk's names, so each program runs on ADK as written. Every
LlmAgent's model is a BaseLlm playing adk_program_models' scripts, through the offline
model's own ScriptView and steps, so ADK and toolfleet get the same model turns. The
drivers print as they do on toolfleet: what this prints is what
adk_programs_expected/<program>.txt holds (less the `=== program` header lines).
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import sys
import types as pytypes
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from google.adk.agents import Agent, BaseAgent, LlmAgent, LoopAgent, ParallelAgent, SequentialAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.events import Event, EventActions
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.planners import BuiltInPlanner, PlanReActPlanner
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner
from google.adk.tools import (
    AgentTool,
    BaseTool,
    FunctionTool,
    LongRunningFunctionTool,
    ToolContext,
    exit_loop,
    load_artifacts,
    load_memory,
)
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = "For context"


def _module(name: str, **names: Any) -> pytypes.ModuleType:
    module = pytypes.ModuleType(name)
    module.__path__ = []  # a package, so submodules resolve
    vars(module).update(names)
    sys.modules[name] = module
    return module


# The names the programs import from toolfleet.adk, as ADK has them. Listed by name:
# ADK's Agent is its LlmAgent, and its ToolContext and CallbackContext are Context.
ADK_NAMES: dict[str, Any] = {
    "Agent": Agent,
    "AgentTool": AgentTool,
    "BaseAgent": BaseAgent,
    "BaseLlm": BaseLlm,
    "BasePlugin": BasePlugin,
    "BaseTool": BaseTool,
    "BuiltInPlanner": BuiltInPlanner,
    "CallbackContext": CallbackContext,
    "Event": Event,
    "EventActions": EventActions,
    "FunctionTool": FunctionTool,
    "InMemoryRunner": InMemoryRunner,
    "LlmAgent": LlmAgent,
    "LlmRequest": LlmRequest,
    "LlmResponse": LlmResponse,
    "LongRunningFunctionTool": LongRunningFunctionTool,
    "LoopAgent": LoopAgent,
    "ParallelAgent": ParallelAgent,
    "PlanReActPlanner": PlanReActPlanner,
    "ReadonlyContext": ReadonlyContext,
    "SequentialAgent": SequentialAgent,
    "ToolConfirmation": ToolConfirmation,
    "ToolContext": ToolContext,
    "exit_loop": exit_loop,
    "load_artifacts": load_artifacts,
    "load_memory": load_memory,
}


class ModelError(Exception):
    """What the offline model raises; here, a script that does not fit the turn."""


def _install_stand_ins() -> Any:
    """`toolfleet.adk` as ADK's names, and the offline model's module, loaded from its
    file with the few toolfleet names it imports."""
    _module("toolfleet")
    _module("toolfleet.adk", **ADK_NAMES)
    _module("toolfleet.orchestrator")
    _module(
        "toolfleet.orchestrator.contents",
        text_part=lambda text: types.Part(text=text),
        call_part=lambda name, args: types.Part(
            function_call=types.FunctionCall(name=name, args=args)
        ),
        content=lambda role, parts: types.Content(role=role, parts=parts),
    )
    _module("toolfleet.orchestrator.models")
    _module(
        "toolfleet.orchestrator.models.protocol",
        INSTRUCTION_AUTHOR="instruction",
        TRANSIENT_AUTHOR="transient",
        ModelRequest=object,
    )
    _module("toolfleet.shared")
    _module("toolfleet.shared.errors", ModelError=ModelError)
    name = "toolfleet.orchestrator.models.offline"
    spec = importlib.util.spec_from_file_location(name, ROOT / "orchestrator/models/offline.py")
    assert spec is not None and spec.loader is not None
    offline = importlib.util.module_from_spec(spec)
    sys.modules[name] = offline
    spec.loader.exec_module(offline)
    return offline


def main(names: list[str]) -> None:
    """Run the drivers on ADK, each agent's model playing its script."""
    sys.path.insert(0, str(ROOT))
    offline = _install_stand_ins()
    from tests.integration import adk_program_drivers as drivers
    from tests.integration.adk_program_models import MODELS

    def view_of(request: LlmRequest) -> Any:
        """The step is the number of model turns since the user's last own text (other
        agents' turns reach ADK's model as user texts starting `For context`)."""
        contents = request.contents
        index = -1
        for i in range(len(contents) - 1, -1, -1):
            texts = [p.text for p in contents[i].parts or () if p.text]
            if contents[i].role == "user" and texts and not texts[0].startswith(CONTEXT):
                index = i
                break
        text = "".join(p.text or "" for p in contents[index].parts or ()) if index >= 0 else ""
        after = contents[index + 1 :]
        responses = []
        if after and after[-1].role == "user":
            responses = [
                (p.function_response.name, dict(p.function_response.response or {}))
                for p in after[-1].parts or ()
                if p.function_response
            ]
        step = sum(1 for c in after if c.role == "model")
        return offline.ScriptView(user_text=text, responses=responses, step=step)

    class Scripted(BaseLlm):
        """Plays the script of the agent named in ADK's system instruction."""

        model: str = "scripted"

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            instruction = str(llm_request.config.system_instruction)
            named = re.search(r'internal name is "([^"]+)"', instruction)
            assert named is not None, instruction
            model = MODELS[named[1]]
            model.requests.append(llm_request)
            view = view_of(llm_request)
            entry = model._script_for(view.user_text)[view.step]
            step = entry(view) if callable(entry) else entry
            yield LlmResponse(content=offline._content(step, view))

    def prepare(agent: Any) -> None:
        if isinstance(agent, LlmAgent):
            agent.model = Scripted()
        for sub in agent.sub_agents:
            prepare(sub)

    drivers.PREPARE = prepare
    asyncio.run(drivers.main(names))


if __name__ == "__main__":
    main(sys.argv[1:])
