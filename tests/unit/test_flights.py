"""The calls out on the fleet: results in the order they come, deadlines from a heap."""

from __future__ import annotations

import asyncio

from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.fleet.flights import Flight, InFlight
from toolfleet.orchestrator.fleet.prepared import PreparedCall
from toolfleet.orchestrator.fleet.protocol import PlannedCall
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult
from toolfleet.shared.tools import tool


@tool
def noop() -> dict[str, bool]:
    """Does nothing."""
    return {"ok": True}


def planned(call_id: str) -> PreparedCall:
    call = ToolCall(
        call_id=call_id,
        tool="noop",
        args={},
        session_id="s",
        app_name="app",
        user_id="u",
        invocation_id="i",
        agent="a",
        reply_to="r",
        dispatched_at=0.0,
    )
    publisher = CeleryPublisher(None)  # type: ignore[arg-type]
    return PreparedCall(
        PlannedCall(call, noop), "default", 1.0, lambda c: publisher.dispatch(c, "tools.default")
    )


def result(call_id: str) -> ToolResult:
    return ToolResult(
        call_id=call_id,
        tool="noop",
        session_id="s",
        invocation_id="i",
        status=CallStatus.SUCCESS,
        response={"ok": True},
    )


async def test_finished_returns_every_result_that_came_and_forgets_those_calls() -> None:
    flights = InFlight()
    futures = {c: asyncio.get_running_loop().create_future() for c in ("a", "b", "c")}
    for call_id, future in futures.items():
        flights.add(future, Flight(planned(call_id), 0.0, 100.0))
    futures["b"].set_result(result("b"))
    futures["c"].set_result(result("c"))

    came = await flights.finished(timeout_s=5)

    assert [(f.prepared.call_id, r.call_id) for f, r in came] == [("b", "b"), ("c", "c")]
    assert len(flights) == 1
    assert await flights.finished(timeout_s=0.01) == []  # nothing more came in time


async def test_expired_takes_calls_past_their_deadline_unless_given_more_time() -> None:
    flights = InFlight()
    loop = asyncio.get_running_loop()
    early, extended, late = (Flight(planned(c), 0.0, d) for c, d in (("a", 1), ("b", 2), ("c", 9)))
    for flight in (early, extended, late):
        flights.add(loop.create_future(), flight)

    def extends(flight: Flight) -> bool:
        if flight is extended and not flight.extended:
            flight.extended, flight.deadline = True, 5.0
            return True
        return False

    assert flights.expired(3.0, extends) == [early]
    assert flights.next_deadline() == 5.0  # the extended call, at its new deadline
    assert flights.expired(6.0, extends) == [extended]
    assert flights.next_deadline() == 9.0 and len(flights) == 1


async def test_a_result_that_came_after_its_deadline_answer_is_not_returned_again() -> None:
    flights = InFlight()
    future = asyncio.get_running_loop().create_future()
    flight = Flight(planned("a"), 0.0, 1.0)
    flights.add(future, flight)
    assert flights.expired(2.0, lambda _: False) == [flight]
    future.set_result(result("a"))  # the late result: the call was answered already
    assert await flights.finished(timeout_s=0.01) == []
