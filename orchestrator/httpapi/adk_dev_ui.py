"""ADK's dev UI on the fleet: the Angular app shipped in the google-adk package (the
`adk-web` extra), served at ADK_PREFIX/dev-ui/ and pointed at ADK's routes under
ADK_PREFIX, with the development routes it reads on loading an app answered for the fleet:
telemetry consent, the agent graph and its drawing, traces, and the eval sets, eval results
and agent builder config that the fleet does not keep (empty)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, params
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.httpapi.adk_graph import agent_dot, find_agent, tool_names
from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.orchestrator.httpapi.errors import ApiError
from toolfleet.orchestrator.httpapi.routes_adk import ADK_PREFIX, AppName
from toolfleet.orchestrator.httpapi.wire import SessionId

DEV_UI = ADK_PREFIX + "/dev-ui/"
NO_STORE = {"Cache-Control": "no-store"}
NO_DEV_UI = "ADK's dev UI comes with google-adk: pip install 'toolfleet[adk-web]'"


def dev_ui_folder() -> Path | None:
    """The dev UI's files in the installed google-adk package; None without it."""
    if importlib.util.find_spec("google.adk") is None:
        return None
    folder = Path(str(resources.files("google.adk") / "cli" / "browser"))
    return folder if (folder / "index.html").is_file() else None


def install_dev_ui(app: FastAPI, api: HttpApi, auth: Sequence[params.Depends]) -> None:
    """Serve the dev UI when google-adk is installed; without it, its address answers 404
    saying which extra to install. Its files and settings are public; what it reads of the
    agents (their graph, traces) needs a caller, as ADK's other routes do (`auth`)."""
    folder = dev_ui_folder()

    @app.get("/dev-ui", include_in_schema=False)
    @app.get("/dev-ui/", include_in_schema=False)
    @app.get(ADK_PREFIX + "/dev-ui", include_in_schema=False)
    async def to_dev_ui() -> Any:
        if folder is None:
            return JSONResponse({"detail": NO_DEV_UI, "status": 404}, status_code=404)
        return RedirectResponse(DEV_UI)

    if folder is None:
        return

    @app.get(DEV_UI + "assets/config/runtime-config.json", include_in_schema=False)
    async def runtime_config() -> JSONResponse:
        # The UI calls its backend at backendUrl + ADK's paths.
        return JSONResponse({"backendUrl": ADK_PREFIX, "telemetry": False}, headers=NO_STORE)

    @app.get(DEV_UI + "config", include_in_schema=False)
    async def ui_config() -> dict[str, None]:
        return {"logo_text": None, "logo_image_url": None}

    @app.get(ADK_PREFIX + "/config/telemetry", include_in_schema=False)
    async def telemetry_consent() -> dict[str, bool]:
        # The dev UI asks before it sends usage data to Google; toolfleet never does.
        return {"telemetry": False}

    reads = APIRouter(prefix=ADK_PREFIX, include_in_schema=False, dependencies=list(auth))

    @reads.get("/dev/apps/{app_name}/build_graph")
    async def build_graph(app_name: AppName) -> dict[str, Any]:
        return {"name": app_name, "root_agent": agent_graph(api.runner(app_name).agent)}

    @reads.get("/dev/apps/{app_name}/build_graph_image")
    async def build_graph_image(
        app_name: AppName, dark_mode: bool = False, node: str = ""
    ) -> dict[str, dict[str, str]]:
        # The UI renders the DOT source itself; keyed by the drawn agent's path.
        agent = find_agent(api.runner(app_name).agent, node)
        if agent is None:
            raise ApiError(404, f"Node not found: {node}")
        return {node: {"dotSrc": agent_dot(agent, dark=dark_mode)}}

    @reads.get("/dev/apps/{app_name}/builder", response_class=PlainTextResponse)
    async def agent_builder(app_name: AppName) -> str:
        # The UI's agent builder edits an app's YAML config; the fleet's agents are Python.
        api.runner(app_name)
        return ""

    @reads.get("/dev/apps/{app_name}/eval_sets")
    async def eval_sets(app_name: AppName) -> list[str]:
        # The fleet keeps no eval sets (nor results, below): the UI's Evals tab is empty.
        api.runner(app_name)
        return []

    @reads.get("/dev/apps/{app_name}/eval_results")
    async def eval_results(app_name: AppName) -> list[str]:
        api.runner(app_name)
        return []

    @reads.get("/dev/apps/{app_name}/debug/trace/session/{session_id}")
    async def session_trace(app_name: AppName, session_id: SessionId) -> list[Any]:
        # Spans go to the operator's OpenTelemetry collector, not to this server.
        api.runner(app_name)
        return []

    app.include_router(reads)

    app.mount(DEV_UI, StaticFiles(directory=folder, html=True), name="adk-dev-ui")


def agent_graph(agent: Agent) -> dict[str, Any]:
    """An agent and its sub-agents as ADK's dev UI draws them: names, model, instruction
    and tools."""
    model = agent.model
    return {
        "name": agent.name,
        "description": agent.description,
        "sub_agents": [agent_graph(a) for a in agent.sub_agents],
        "model": model if isinstance(model, str) else getattr(model, "model", None),
        "instruction": agent.instruction if isinstance(agent.instruction, str) else "",
        "tools": [{"name": name, "type": "tool"} for name in tool_names(agent)],
        "disallow_transfer_to_parent": agent.disallow_transfer_to_parent,
        "disallow_transfer_to_peers": agent.disallow_transfer_to_peers,
        "include_contents": agent.include_contents,
    }
