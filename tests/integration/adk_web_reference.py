"""Run ADK's own `adk api_server` or `adk web` on tests/integration/adk_web_apps, the
apps' `toolfleet.adk` imports resolving to google.adk's names: the reference server the
ADK-protocol tests also run against.

    python tests/integration/adk_web_reference.py web|api_server --port N

Run with a Python that has google-adk installed (toolfleet itself is not needed).
"""

from __future__ import annotations

import sys
import types as pytypes
from pathlib import Path

from google.adk.agents import Agent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.tools import LongRunningFunctionTool, ToolContext

APPS = Path(__file__).resolve().parent / "adk_web_apps"

# The names the apps import from toolfleet.adk, as ADK has them.
ADK_NAMES = {
    "Agent": Agent,
    "BaseLlm": BaseLlm,
    "LlmRequest": LlmRequest,
    "LlmResponse": LlmResponse,
    "LongRunningFunctionTool": LongRunningFunctionTool,
    "ToolContext": ToolContext,
}


def main(argv: list[str]) -> None:
    """`adk <command> <apps folder> <argv...>` with `toolfleet.adk` as ADK's names."""
    package = pytypes.ModuleType("toolfleet")
    package.__path__ = []
    adk = pytypes.ModuleType("toolfleet.adk")
    vars(adk).update(ADK_NAMES)
    sys.modules.update({"toolfleet": package, "toolfleet.adk": adk})
    from google.adk.cli.cli_tools_click import main as adk_main

    command, *rest = argv
    sys.argv = ["adk", command, *rest, str(APPS)]
    adk_main()


if __name__ == "__main__":
    main(sys.argv[1:])
