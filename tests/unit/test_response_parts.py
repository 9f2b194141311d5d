"""The function responses of a turn, made as each result arrives: the event they make
is the one made from the results at the end."""

from __future__ import annotations

from toolfleet.orchestrator.loop.cancelling import closed_by_cancel
from toolfleet.orchestrator.loop.turn import ResponseParts, responses_event
from toolfleet.orchestrator.sessions.events import CallRecord, Event
from toolfleet.shared.messages import CallStatus, ToolResult


def result(
    call_id: str, response: dict[str, object], status: CallStatus = CallStatus.SUCCESS
) -> ToolResult:
    return ToolResult(
        call_id=call_id, tool="lookup", session_id="s", invocation_id="i",
        status=status, response=response, worker="w1", pid=7,
        started_at=1.0, finished_at=2.0,
    )  # fmt: skip


def same(one: Event, other: Event) -> bool:
    """Whether two events carry the same responses, records and actions (each has its
    own id and time)."""
    fields = {"content", "calls", "actions", "state_delta"}
    return one.model_dump(include=fields) == other.model_dump(include=fields)


def test_parts_made_on_arrival_make_the_event_made_at_the_end() -> None:
    results = [result(f"c{i}", {"n": i}) for i in range(3)]
    made = ResponseParts()
    for arrived in reversed(results):  # in any order they finish
        made.add(arrived)
    event = responses_event("i", "agent", results, made=made)
    assert same(event, responses_event("i", "agent", results))
    assert event.content is not None and event.content.parts is not None
    assert [p.function_response.id for p in event.content.parts] == ["c0", "c1", "c2"]  # type: ignore[union-attr]
    assert [c.call_id for c in event.calls] == ["c0", "c1", "c2"]


def test_a_result_that_took_an_arrived_ones_place_gets_its_own_part() -> None:
    arrived = result("c1", {"ticket": "t-1"}, CallStatus.PENDING)
    made = ResponseParts()
    made.add(arrived)
    replaced = closed_by_cancel(arrived)  # the session was cancelled meanwhile
    assert replaced is not arrived
    event = responses_event("i", "agent", [replaced], made=made)
    assert same(event, responses_event("i", "agent", [replaced]))
    assert event.calls[0].status is CallStatus.ERROR
    assert event.content is not None and event.content.parts is not None
    response = event.content.parts[0].function_response
    assert response is not None and response.response == replaced.response


def test_a_part_is_a_copy_of_the_response_made_when_it_arrived() -> None:
    arrived = result("c1", {"n": 1})
    made = ResponseParts()
    made.add(arrived)
    event = responses_event("i", "agent", [arrived], made=made)
    assert event.content is not None and event.content.parts is not None
    response = event.content.parts[0].function_response
    assert response is not None and response.response == {"n": 1}
    assert response.response is not arrived.response  # the event's own


def test_a_calls_record_is_the_one_validation_would_make() -> None:
    """CallRecord.of sets the fields without validating them again: the record equals,
    dumps and copies as the validated one."""
    arrived = result("c1", {"n": 1}, CallStatus.ERROR).model_copy(update={"attempt": 2})
    made = CallRecord.of(arrived)
    validated = CallRecord.model_validate(
        {name: getattr(arrived, name) for name in CallRecord.model_fields}
    )
    assert made == validated
    assert made.model_fields_set == validated.model_fields_set
    assert made.model_dump_json(exclude_defaults=True) == validated.model_dump_json(
        exclude_defaults=True
    )
    assert made.model_copy(update={"pid": 8}).pid == 8 and made.pid == 7
