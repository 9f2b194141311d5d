"""MCP arguments (`toolfleet mcp serve`) and a tool's result and state writes (the worker)
nested over TOOLFLEET_MAX_JSON_DEPTH: error results naming the limit, measured before
anything walks them."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from tests.support import LocalTool
from tests.unit.test_deep_calls import keep
from tests.unit.test_json_depth import ABYSS, SETTING, nested
from toolfleet.orchestrator.mcpserve.fleet_calls import FleetCalls
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus, ToolCall
from toolfleet.workers.executor import execute

KEYS = Keys("t")


async def test_mcp_arguments_nested_too_deep_are_refused_before_anything_walks_them() -> None:
    # The check comes first: the fleet is never reached (it is None here).
    replica: Any = SimpleNamespace(id="r1", keys=KEYS, settings=Settings(), fleet=None)
    calls = FleetCalls(replica, "app", "u")
    result = await calls.run(LocalTool(keep), {"data": nested(ABYSS)})
    assert result.status is CallStatus.ERROR
    assert result.response["error_type"] == "InvalidArguments"
    assert (
        f"more than 64 levels deep; the limit is 64 ({SETTING})"
        in (result.response["error_message"])
    )


def test_a_tools_result_or_state_write_nested_too_deep_is_rejected_on_the_worker() -> None:
    def deep_result() -> dict[str, Any]:
        """Returns deep data."""
        return nested(ABYSS)

    def deep_state(tool_context: ToolContext) -> str:
        """Writes deep state."""
        tool_context.state["plan"] = nested(ABYSS)
        return "written"

    def call_of(func: Any, args: dict[str, Any]) -> Any:
        tool = LocalTool(func)
        envelope = ToolCall(
            call_id="c1", tool=tool.name, args=args, session_id="s", app_name="app",
            user_id="u", invocation_id="i", agent="a", reply_to="r", dispatched_at=time.time(),
        )  # fmt: skip
        return execute(tool, envelope, worker="w", max_result_bytes=10_000).result

    result, state, args = (
        call_of(deep_result, {}),
        call_of(deep_state, {}),
        call_of(keep, {"data": nested(ABYSS)}),  # past the orchestrator: checked again
    )
    assert result.response["error_type"] == "ResultRejected"
    assert "the tool's result nests" in result.response["error_message"]
    assert state.response["error_type"] == "ResultRejected" and state.state_delta == {}
    assert "the state write 'plan' nests" in state.response["error_message"]
    assert args.response["error_type"] == "InvalidArguments"
    for rejected in (result, state, args):
        assert SETTING in rejected.response["error_message"]
