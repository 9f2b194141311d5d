"""The worker-side executor: wrapping, errors for the model, state deltas, size caps."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from tests.support import LocalTool
from toolfleet.shared.context import ToolContext
from toolfleet.shared.errors import ToolError
from toolfleet.shared.messages import CallStatus, ToolCall
from toolfleet.shared.tools import FunctionTool
from toolfleet.workers.executor import execute


def envelope(tool: str, args: dict[str, Any], state: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(
        call_id="c1", tool=tool, args=args, session_id="s", app_name="app", user_id="u",
        invocation_id="inv", agent="a", state=state or {}, reply_to="r", dispatched_at=time.time(),
    )  # fmt: skip


def run(func: Any, args: dict[str, Any], **kw: Any) -> Any:
    tool = func if isinstance(func, FunctionTool) else LocalTool(func)
    return execute(
        tool,
        envelope(tool.name, args, kw.pop("state", None)),
        worker="w",
        max_result_bytes=kw.pop("limit", 10_000),
    ).result


def test_non_dict_result_is_wrapped() -> None:
    def double(x: int) -> int:
        """Doubles."""
        return 2 * x

    result = run(double, {"x": 21})
    assert result.status is CallStatus.SUCCESS
    assert result.response == {"result": 42}
    assert result.wrapped  # after_tool callbacks get 42 itself, as in ADK


def test_a_dict_holding_only_result_is_the_tools_own_not_a_wrapping() -> None:
    def answer(x: int) -> dict[str, int]:
        """Answers."""
        return {"result": x}

    result = run(answer, {"x": 1})
    assert result.response == {"result": 1} and not result.wrapped


def test_dict_result_is_passed_through_and_timed() -> None:
    def info(x: int) -> dict[str, int]:
        """Info."""
        return {"x": x}

    result = run(info, {"x": 1})
    assert result.response == {"x": 1} and not result.wrapped
    assert result.worker == "w" and result.pid > 0 and result.finished_at >= result.started_at


def test_async_tool_runs() -> None:
    async def later(x: int) -> int:
        """Later."""
        await asyncio.sleep(0)  # ok: the tool under test yields to the loop once
        return x + 1

    assert run(later, {"x": 1}).response == {"result": 2}


def test_exception_becomes_error_response_and_traceback_stays_in_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(x: int) -> int:
        """Broken."""
        raise ValueError(f"cannot handle {x}")

    with caplog.at_level(logging.ERROR):
        result = run(broken, {"x": 7})
    assert result.status is CallStatus.ERROR
    assert result.response == {
        "status": "error",
        "error_type": "ValueError",
        "error_message": "cannot handle 7",
    }
    assert "Traceback" in caplog.text and "Traceback" not in str(result.response)


def test_tool_error_message_goes_to_the_model_verbatim() -> None:
    def picky(city: str) -> str:
        """Picky."""
        raise ToolError(f"no data for {city}; try a capital city")

    result = run(picky, {"city": "Nowhere"})
    assert result.response["error_type"] == "ToolError"
    assert result.response["error_message"] == "no data for Nowhere; try a capital city"


def test_state_writes_travel_back_as_a_delta() -> None:
    def count(tool_context: ToolContext) -> int:
        """Counts."""
        seen = tool_context.state.get("count", 0)
        tool_context.state["count"] = seen + 1
        tool_context.state["temp:scratch"] = "x"
        return int(seen)

    result = run(count, {}, state={"count": 4, "other": 1})
    assert result.response == {"result": 4}
    assert result.state_delta == {"count": 5, "temp:scratch": "x"}


def test_oversized_result_is_replaced_by_an_error() -> None:
    def big() -> str:
        """Big."""
        return "x" * 20_000

    result = run(big, {}, limit=10_000)
    assert result.status is CallStatus.ERROR
    assert result.response["error_type"] == "ResultRejected"
    assert "over the 10000-byte limit" in result.response["error_message"]


def test_unserializable_result_is_an_error() -> None:
    def odd() -> object:
        """Odd."""
        return {"when": object()}

    result = run(odd, {})
    assert result.response["error_type"] == "ResultRejected"


def test_invalid_args_are_refused_on_the_worker_too() -> None:
    def typed(x: int) -> int:
        """Typed."""
        return x

    result = run(typed, {"x": "not a number"})
    assert result.status is CallStatus.ERROR
    assert result.response["error_type"] == "InvalidArguments"


def test_long_running_initial_result_is_pending() -> None:
    def ask_for_approval(amount: float) -> dict[str, Any]:
        """Asks."""
        return {"status": "pending", "ticket_id": "t-1"}

    result = run(LocalTool(ask_for_approval, is_long_running=True), {"amount": 5})
    assert result.status is CallStatus.PENDING
    assert result.response["ticket_id"] == "t-1"


NAMES = ["api_key", "password"]
KEY = "sk-live-4242"


def login(api_key: str, user: dict[str, str]) -> None:
    """Logs in."""
    raise PermissionError(f"GET https://api.example/v1?key={api_key} refused for {user}")


def test_a_tools_exception_quoting_a_secret_argument_is_masked_for_the_model_and_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tool = LocalTool(login)
    call = envelope(tool.name, {"api_key": KEY, "user": {"name": "ann", "password": "hunter22"}})
    with caplog.at_level(logging.ERROR):
        outcome = execute(tool, call, worker="w", max_result_bytes=10_000, secret_names=NAMES)
    message = outcome.result.response["error_message"]
    assert KEY not in message and "hunter22" not in message and "key=***" in message
    assert outcome.result.response["error_type"] == "PermissionError"
    assert KEY not in caplog.text and "hunter22" not in caplog.text
    assert "Traceback" in caplog.text and "key=***" in caplog.text
    assert isinstance(outcome.exception, PermissionError)  # retry_on still sees its type


def test_a_tool_error_quoting_a_secret_state_value_is_masked() -> None:
    def check(tool_context: ToolContext) -> None:
        """Checks."""
        raise ToolError(f"token {tool_context.state['user:token']} expired")

    tool = LocalTool(check)
    call = envelope(tool.name, {}, {"user:token": "tok-9999"})
    outcome = execute(tool, call, worker="w", max_result_bytes=10_000, secret_names=["token"])
    assert outcome.result.response["error_message"] == "token *** expired"


def test_a_bad_secret_argument_is_refused_on_the_worker_without_quoting_its_value() -> None:
    def unlock(api_key: int) -> str:
        """Unlocks with a numeric key."""
        return "open"

    tool = LocalTool(unlock)
    call = envelope(tool.name, {"api_key": KEY})
    outcome = execute(tool, call, worker="w", max_result_bytes=10_000, secret_names=NAMES)
    assert outcome.result.response["error_type"] == "InvalidArguments"
    assert KEY not in outcome.result.response["error_message"]
    assert "(got '***')" in outcome.result.response["error_message"]
