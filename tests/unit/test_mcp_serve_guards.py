"""What `toolfleet mcp serve` keeps of an agent's guards: arguments over
TOOLFLEET_MAX_PAYLOAD_BYTES are refused as in an agent's turn, and an agent whose tool
callbacks guard its tools is not served (they run only in its turns)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.support import LocalTool
from tests.unit.test_deep_calls import keep
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.mcpserve.catalog import TOOL_CALLBACKS, Catalog
from toolfleet.orchestrator.mcpserve.fleet_calls import FleetCalls
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus


async def test_arguments_over_the_size_limit_are_refused_before_anything_is_sent() -> None:
    # The fleet is never reached (it is None here): an oversized call is answered here.
    settings = Settings(max_payload_bytes=4096)
    replica: Any = SimpleNamespace(id="r1", keys=Keys("t"), settings=settings, fleet=None)
    calls = FleetCalls(replica, "app", "u")
    result = await calls.run(LocalTool(keep), {"data": "x" * 5000})
    assert result.status is CallStatus.ERROR
    assert result.response["error_type"] == "InvalidArguments"
    assert "over the 4096-byte limit" in result.response["error_message"]


def refuse(tool: Any, args: dict[str, Any], tool_context: Any) -> dict[str, Any] | None:
    return {"error": "refused"}


@pytest.mark.parametrize("callback", TOOL_CALLBACKS)
def test_an_agent_whose_tool_callbacks_guard_its_tools_is_not_served(callback: str) -> None:
    guarded = Agent(name="bank", tools=[LocalTool(keep)], **{callback: refuse})
    with pytest.raises(ConfigError, match=f"'bank' has {callback}.*--tools"):
        Catalog.of_agent(guarded, "mcp")
    plain = Agent(name="bank", tools=[LocalTool(keep)])
    assert Catalog.of_agent(plain, "mcp").agent is plain
