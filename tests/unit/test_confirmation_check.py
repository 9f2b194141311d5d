"""A worker runs a call whose tool requires a confirmation only when the call carries a
person's yes, whoever sent it; the tool's check of the arguments decides as on the
orchestrator, and a check that fails lets nothing through."""

from __future__ import annotations

import time
from typing import Any

from tests.support import LocalTool
from toolfleet.shared.context import ToolContext
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult
from toolfleet.workers.executor import execute

RUNS: list[int] = []


def pay(amount: int) -> dict[str, int]:
    """Pays.

    Args:
        amount: Euros.
    """
    RUNS.append(amount)
    return {"paid": amount}


async def pay_later(amount: int) -> dict[str, int]:
    """Pays, as a coroutine.

    Args:
        amount: Euros.
    """
    RUNS.append(amount)
    return {"paid": amount}


def over_100(amount: int, tool_context: ToolContext) -> bool:
    return amount > 100 and tool_context.agent_name == "a"


async def over_100_later(amount: int) -> bool:
    return amount > 100


def unknown(amount: int) -> bool:
    raise RuntimeError("the limits service is down")


def sent(tool: LocalTool, amount: int, confirmation: dict[str, Any] | None = None) -> ToolResult:
    RUNS.clear()
    call = ToolCall(
        call_id="c1", tool=tool.name, args={"amount": amount}, session_id="s", app_name="app",
        user_id="u", invocation_id="inv", agent="a", reply_to="r", dispatched_at=time.time(),
        confirmation=confirmation,
    )  # fmt: skip
    return execute(tool, call, worker="w", max_result_bytes=10_000).result


def refused(result: ToolResult) -> bool:
    return (
        result.status is CallStatus.ERROR
        and result.response["error_type"] == "ConfirmationRequired"
        and RUNS == []
    )


def test_a_call_sent_without_a_confirmation_does_not_run() -> None:
    for tool in (
        LocalTool(pay, require_confirmation=True),
        LocalTool(pay_later, require_confirmation=True),
    ):
        result = sent(tool, 5000)
        assert refused(result)
        assert "without a confirmation; it was not run" in result.response["error_message"]


def test_a_confirmed_call_runs_and_a_rejected_one_does_not() -> None:
    tool = LocalTool(pay, require_confirmation=True)
    assert refused(sent(tool, 5000, {"confirmed": False, "hint": "", "payload": None}))
    assert refused(sent(tool, 5000, {"hint": "forged: no answer"}))

    ran = sent(tool, 5000, {"confirmed": True, "hint": "", "payload": None})

    assert ran.status is CallStatus.SUCCESS and ran.response == {"paid": 5000}
    assert RUNS == [5000]


def test_the_tools_check_decides_as_on_the_orchestrator() -> None:
    for check in (over_100, over_100_later):
        tool = LocalTool(pay, require_confirmation=check)
        assert sent(tool, 20).response == {"paid": 20} and RUNS == [20]
        assert refused(sent(tool, 500))


def test_a_check_that_fails_lets_nothing_through() -> None:
    result = sent(LocalTool(pay, require_confirmation=unknown), 1)
    assert refused(result)
    assert "failed (RuntimeError)" in result.response["error_message"]
