"""The executor's guards: state writes checked like the response; nothing of a call outlives it.

Celery's soft time limit is a signal whose handler (billiard's `soft_timeout_sighandler`)
raises SoftTimeLimitExceeded in the worker's main thread. A coroutine tool waiting on the
loop is then inside the selector's `select`, so the exception leaves `run_until_complete`
and the tool's task stays scheduled on the loop. These tests raise it the same way: the
same handler, on SIGALRM from an interval timer the tool arms just before it parks.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any

import pytest
from billiard.pool import soft_timeout_sighandler

from tests.support import LocalTool
from tests.unit.test_executor import envelope
from toolfleet.shared.context import ToolContext
from toolfleet.shared.messages import CallStatus, ToolResult
from toolfleet.workers import call_loop as call_loop_module
from toolfleet.workers import executor as executor_module
from toolfleet.workers.call_loop import call_loop
from toolfleet.workers.executor import Execution, OutcomeOf, execute, start_coroutine

LIMIT = 10_000
# When the "soft limit" fires after the tool parks: the loop is in select() well before.
INTERRUPT_AFTER_S = 0.05
# Far longer than any test: a tool parked this long is only ever ended by the interrupt.
PARKED_S = 60.0


def run(func: Any, args: dict[str, Any] | None = None, **kw: Any) -> ToolResult:
    tool = LocalTool(func)
    return execute(
        tool,
        envelope(tool.name, args or {}, kw.pop("state", None)),
        worker="w",
        max_result_bytes=kw.pop("limit", LIMIT),
        time_limit_s=kw.pop("time_limit_s", 0.0),
    ).result


@pytest.fixture
def soft_limit_signal() -> Iterator[None]:
    """SIGALRM raises SoftTimeLimitExceeded, as SIGUSR1 does in a Celery pool child."""
    previous = signal.signal(signal.SIGALRM, soft_timeout_sighandler)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def loop_tasks() -> set[asyncio.Task[Any]]:
    """The tasks on this process's call loop now."""
    loop = call_loop().loop
    return asyncio.run_coroutine_threadsafe(_tasks(), loop).result(5)


async def _tasks() -> set[asyncio.Task[Any]]:
    return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]


def arm_soft_limit() -> None:
    signal.setitimer(signal.ITIMER_REAL, INTERRUPT_AFTER_S)


def assert_rejected(result: ToolResult) -> str:
    assert result.status is CallStatus.ERROR, result
    assert result.response["error_type"] == "ResultRejected", result.response
    assert result.state_delta == {}  # nothing of the bad write travels
    message: str = result.response["error_message"]
    return message


# --- results ---------------------------------------------------------------------------


def test_a_result_keyed_by_other_than_strings_is_rejected_saying_so() -> None:
    """JSON writes {1: "x"} (as {"1": "x"}), so the result passed the JSON check, but no
    ToolResult takes it: the call was never answered, and waited for its deadline."""

    def lookup() -> dict[Any, str]:
        """Looks up."""
        return {1: "x", "fine": "y"}

    message = assert_rejected(run(lookup))
    assert "keys that are not strings (1)" in message and "key it by strings" in message


def quits() -> str:
    """Quits."""
    raise SystemExit(3)


def test_a_tool_that_exits_on_a_pool_thread_is_answered_with_it() -> None:
    """On an io worker's thread, `sys.exit()` in a tool is the tool's: answered as an
    error, as any exception of its (re-raised, it left the call unanswered and its
    message unacknowledged until the broker gave it to another worker to exit again)."""
    with ThreadPoolExecutor(1) as pool:
        result = pool.submit(run, quits).result(10)
    assert result.status is CallStatus.ERROR
    assert result.response["error_type"] == "SystemExit"


def test_a_tool_that_exits_on_the_main_thread_stops_it() -> None:
    """A prefork child runs its tool on its main thread: there an exit is the process's."""
    with pytest.raises(SystemExit):
        run(quits)


# --- state writes ---------------------------------------------------------------------


def test_unserializable_state_write_is_rejected_naming_the_key() -> None:
    def remember(tool_context: ToolContext) -> str:
        """Remembers."""
        tool_context.state["fine"] = 1
        tool_context.state["last_seen"] = datetime(2025, 1, 2)
        return "ok"

    message = assert_rejected(run(remember))
    assert "'last_seen'" in message and "'fine'" not in message
    assert "not JSON-serializable" in message
    assert "tool_context.state" in message  # says what to change


def test_every_unserializable_state_key_is_named() -> None:
    def remember(tool_context: ToolContext) -> str:
        """Remembers."""
        tool_context.state["a"] = {1, 2}
        tool_context.state["b"] = object()
        tool_context.state[7] = "a key that is not a string"  # type: ignore[index]
        return "ok"

    message = assert_rejected(run(remember))
    assert "'a'" in message and "'b'" in message and "7 (a key must be a string)" in message


def test_oversized_state_write_is_rejected_naming_the_key() -> None:
    def hoard(tool_context: ToolContext) -> str:
        """Hoards."""
        tool_context.state["small"] = "x"
        tool_context.state["blob"] = "x" * 5_000_000
        return "ok"

    started = time.monotonic()
    message = assert_rejected(run(hoard))
    assert time.monotonic() - started < 5  # answered at once
    assert f"over the {LIMIT}-byte limit" in message
    assert "'blob'" in message
    assert "tool_context.state" in message


def test_response_and_state_writes_count_together_against_the_limit() -> None:
    def split(tool_context: ToolContext) -> str:
        """Puts half its data in its response and half in state: each fits, both do not."""
        tool_context.state["half"] = "x" * (LIMIT // 2 + 100)
        return "x" * (LIMIT // 2 + 100)

    message = assert_rejected(run(split))
    assert "'half'" in message and f"over the {LIMIT}-byte limit" in message


def test_bad_state_write_of_a_failing_tool_is_rejected_too() -> None:
    def fail_after_writing(tool_context: ToolContext) -> str:
        """Writes something unsendable, then fails."""
        tool_context.state["handle"] = object()
        raise ValueError("boom")

    message = assert_rejected(run(fail_after_writing))
    assert "'handle'" in message
    assert message.endswith("(the call failed too: ValueError: boom)")  # not lost


def test_sendable_state_writes_still_travel() -> None:
    def note(tool_context: ToolContext) -> str:
        """Notes."""
        tool_context.state["note"] = {"when": "2025-01-02", "tags": ["a", None, 1.5]}
        del tool_context.state["old"]
        return "ok"

    result = run(note, state={"old": 1})
    assert result.status is CallStatus.SUCCESS
    assert result.state_delta == {
        "note": {"when": "2025-01-02", "tags": ["a", None, 1.5]},
        "old": None,
    }
    ToolResult.model_validate_json(result.model_dump_json())  # and it can be posted


# --- nothing of a call outlives it --------------------------------------------------------


def test_async_tool_interrupted_by_the_soft_limit_never_resumes_in_a_later_call(
    soft_limit_signal: None,
) -> None:
    log: list[str] = []
    gate = asyncio.Event()  # the second call opens it: the first tool would then go on

    async def slow(tool_context: ToolContext) -> str:
        """Parks until the gate opens, then records its side effect."""
        log.append("first parked")
        arm_soft_limit()
        try:
            await gate.wait()
        except asyncio.CancelledError:
            log.append("first cancelled")
            raise
        log.append("first side effect")
        tool_context.state["late"] = True
        return "late"

    async def opener() -> str:
        """Opens the gate, then gives the loop turns in which a leftover task would run."""
        gate.set()
        for _ in range(20):
            await asyncio.sleep(0)  # ok: yields to the loop; does not wait for time
        log.append("second done")
        return "opened"

    first = run(slow, time_limit_s=INTERRUPT_AFTER_S)
    assert first.response["error_type"] == "TimeoutError", first.response
    assert log[0] == "first parked"  # the interrupt hit the tool while it was parked

    second = run(opener)
    assert second.response == {"result": "opened"}
    assert "first side effect" not in log, log
    # Its task was cancelled (before the second call started), and nothing is left on the
    # loop to run in a third call either.
    assert log == ["first parked", "first cancelled", "second done"]
    assert not loop_tasks()
    assert run(opener).response == {"result": "opened"}
    assert "first side effect" not in log, log


def test_tool_that_swallows_cancellation_cannot_hang_the_worker(
    soft_limit_signal: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(call_loop_module, "DRAIN_TIMEOUT_S", 0.2)
    log: list[str] = []
    release = asyncio.Event()  # the test's cleanup: lets the stubborn tool out at last

    async def stubborn() -> str:
        """Ignores every cancellation; would record a side effect if it ever got out."""
        log.append("parked")
        arm_soft_limit()
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                log.append("ignored a cancellation")
        return "released"

    async def quick() -> str:
        """Quick."""
        for _ in range(20):
            await asyncio.sleep(0)  # ok: yields to the loop
        return "quick"

    started = time.monotonic()
    first = run(stubborn, time_limit_s=INTERRUPT_AFTER_S)
    took = time.monotonic() - started
    assert first.response["error_type"] == "TimeoutError", first.response
    assert took < INTERRUPT_AFTER_S + 2 * 0.2 + 2.0, took  # the wait for it was bounded
    assert "ignored a cancellation" in log
    # The shared loop goes on: the next call runs beside the task that would not stop.
    assert run(quick).response == {"result": "quick"}
    loop = call_loop().loop
    loop.call_soon_threadsafe(release.set)


def test_soft_limit_during_the_cleanup_leaves_the_loop_serving(soft_limit_signal: None) -> None:
    log: list[str] = []

    async def slow_to_cancel() -> str:
        """Takes its time over its cancellation; the soft limit comes again meanwhile."""
        arm_soft_limit()
        try:
            await asyncio.sleep(PARKED_S)  # ok: parks; only the interrupt ends it
        except asyncio.CancelledError:
            arm_soft_limit()
            await asyncio.sleep(PARKED_S)  # ok: a cleanup the interrupt cuts short
            log.append("cleanup finished")
            raise
        return "late"

    async def quick() -> str:
        """Quick."""
        await asyncio.sleep(0)  # ok: yields to the loop
        return "quick"

    first = run(slow_to_cancel, time_limit_s=INTERRUPT_AFTER_S)
    assert first.response["error_type"] == "TimeoutError", first.response
    assert run(quick).response == {"result": "quick"}
    assert log == []


def test_background_task_of_a_finished_call_does_not_run_in_the_next() -> None:
    log: list[str] = []
    background: set[asyncio.Task[None]] = set()
    gate = asyncio.Event()

    async def fire_and_forget() -> str:
        """Starts a background task and returns at once."""

        async def later() -> None:
            await gate.wait()
            log.append("background side effect")

        background.add(asyncio.get_running_loop().create_task(later()))
        return "started"

    async def opener() -> str:
        """Opens the gate and yields."""
        gate.set()
        for _ in range(20):
            await asyncio.sleep(0)  # ok: yields to the loop
        return "opened"

    assert run(fire_and_forget).response == {"result": "started"}
    assert run(opener).response == {"result": "opened"}
    assert log == []
    assert all(task.cancelled() for task in background)


# --- text UTF-8 cannot carry ------------------------------------------------------------


def test_a_results_lone_surrogates_are_replaced_and_the_result_is_sent() -> None:
    def scrape(tool_context: ToolContext) -> dict[str, str]:
        """Scrapes a page whose bytes were decoded with errors='surrogateescape'."""
        tool_context.state["title\udcff"] = b"caf\xe9".decode("utf-8", "surrogateescape")
        return {"text": "ok \udce9 then \ud83d\ude00"}

    result = run(scrape)
    assert result.status is CallStatus.SUCCESS
    assert result.response == {"text": "ok \ufffd then \U0001f600"}
    assert result.state_delta == {"title\ufffd": "caf\ufffd"}
    assert ToolResult.model_validate_json(result.model_dump_json()) == result  # it travels


def test_an_errors_message_with_lone_surrogates_reaches_the_model() -> None:
    def fail() -> None:
        """Fails, quoting undecodable input."""
        raise ValueError("cannot parse \udc80")

    result = run(fail)
    assert result.status is CallStatus.ERROR
    assert result.response["error_message"].endswith("cannot parse \ufffd")
    result.model_dump_json()


def started(func: Any) -> OutcomeOf:
    """What `start_coroutine` hands on once `func`'s call has ended on the call loop."""
    tool = LocalTool(func)
    execution = Execution(tool, envelope(tool.name, {}), worker="w", attempt=1,
                          max_result_bytes=LIMIT, services=None)  # fmt: skip
    ended: Future[OutcomeOf] = Future()
    start_coroutine(execution, 0.0, ended.set_result)
    return ended.result(timeout=10)


def test_a_coroutine_calls_outcome_is_made_when_concluded_with_the_time_it_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The call loop hands on what makes the outcome (the step that concludes the call
    makes it, off the loop's thread), stamped with when the coroutine ended."""

    async def quick() -> dict[str, int]:
        """Answers at once."""
        return {"n": 1}

    outcome_of = started(quick)
    ended_by = time.time()
    monkeypatch.setattr(executor_module.time, "time", lambda: ended_by + 3600)  # concluded late
    result = outcome_of().result
    assert result.status is CallStatus.SUCCESS and result.response == {"n": 1}
    assert result.finished_at <= ended_by


class Abandoned(BaseException):
    """Not an Exception: what no tool should raise, and one may."""


def test_a_coroutine_that_raises_a_base_exception_is_answered_with_an_error() -> None:
    """A tool's coroutine that ends with a BaseException other than an Exception did not
    interrupt the concluding thread: its call gets an error result, and is concluded."""

    async def abandons() -> dict[str, int]:
        """Raises what is not an Exception."""
        raise Abandoned("gave up")

    result = started(abandons)().result
    assert result.status is CallStatus.ERROR
    assert result.response["error_type"] == "Abandoned"
    assert result.response["error_message"] == "gave up"
