"""The function responses of a turn, made as each result arrives: the event they make
is the one made from the results at the end."""

from __future__ import annotations

import fakeredis
import pytest

from toolfleet.orchestrator.loop.cancelling import closed_by_cancel
from toolfleet.orchestrator.loop.turn import ResponseParts, responses_event
from toolfleet.orchestrator.sessions.encoding import EncodedPieces, joined_text
from toolfleet.orchestrator.sessions.events import CallRecord, Event
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import CallStatus, ToolResult
from toolfleet.shared.redaction import findable_in_pieces, secret_name_set


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


# ------------------------------------------------ the responses event's stored text


def stored_text(store: SessionStore, event: Event, pieces: EncodedPieces | None) -> str:
    """The text `store` writes for `event` (its RPUSH), given `pieces`."""
    batch = WriteBatch()
    session = Session(id="s", app_name="app", user_id="u")
    store.stage_append(batch, session, event, pieces=pieces)
    pushed = [c for c in batch.commands if c[0] == "RPUSH"]
    assert len(pushed) == 1
    return str(pushed[0][2])


VARIED = [
    result("c0", {"n": 0, "nested": {"list": [1, 2.5, None, True], "text": 'é\u2028"q"\n'}}),
    result("c1", {"error": "TimeoutError", "message": "ran past 5 s"}, CallStatus.ERROR),
    result("c2", {"ticket": "t-9", "status": "pending"}, CallStatus.PENDING),
    result("c3", {}).model_copy(update={"attempt": 3, "pid": 0, "worker": ""}),
    result("c4", {"emoji": "\U0001f600", "big": 2**70, "neg": -0.0}),
]


@pytest.mark.parametrize("count", [1, 2, len(VARIED)])
def test_the_text_joined_from_pieces_is_the_event_encoded_whole(count: int) -> None:
    store = SessionStore(fakeredis.FakeAsyncRedis(), Keys("t"), ("password",))
    results = VARIED[:count]
    made = ResponseParts(names_secret=store.may_name_secret)
    for arrived in reversed(results):
        made.add(arrived)
    event = responses_event("i", "agent", results, state={"user:a": 1}, made=made).model_copy(
        update={"state_delta": {"user:a": 2, "temp:x": 1, "b": [1]}}
    )
    pieces = made.pieces(results)
    assert pieces is not None and not pieces.may_name_secret
    joined = joined_text(event, pieces, store.may_name_secret)
    assert joined is not None
    assert joined == (event.model_dump_json(exclude_defaults=True), False)
    # The store leaves temp: state out (a copy of the event) and still joins the pieces.
    expected = event.model_copy(update={"state_delta": {"user:a": 2, "b": [1]}})
    assert stored_text(store, event, pieces) == expected.model_dump_json(exclude_defaults=True)


def test_pieces_of_other_events_are_not_joined() -> None:
    results = VARIED[:3]
    made = ResponseParts(names_secret=lambda text: False)
    event = responses_event("i", "agent", results, made=made)
    fewer = made.pieces(results[:2])
    assert fewer is not None
    assert joined_text(event, fewer, lambda text: False) is None
    store = SessionStore(fakeredis.FakeAsyncRedis(), Keys("t"))
    assert stored_text(store, event, fewer) == event.model_dump_json(exclude_defaults=True)


def test_a_secret_named_key_in_one_piece_is_masked_in_the_stored_text() -> None:
    store = SessionStore(fakeredis.FakeAsyncRedis(), Keys("t"), ("password",))
    results = [result("c0", {"n": 1}), result("c1", {"user": "ann", "Pass_Word": "hunter2"})]
    made = ResponseParts(names_secret=store.may_name_secret)
    for arrived in results:
        made.add(arrived)
    pieces = made.pieces(results)
    assert pieces is not None and pieces.may_name_secret
    text = stored_text(store, responses_event("i", "agent", results, made=made), pieces)
    assert "hunter2" not in text and '"Pass_Word":"***"' in text


def test_a_secret_named_state_key_around_the_pieces_is_masked() -> None:
    store = SessionStore(fakeredis.FakeAsyncRedis(), Keys("t"), ("token",))
    results = [result("c0", {"n": 1})]
    made = ResponseParts(names_secret=store.may_name_secret)
    made.add(results[0])
    event = responses_event("i", "agent", results, made=made).model_copy(
        update={"state_delta": {"token": "s3cr3t"}}
    )
    pieces = made.pieces(results)
    assert pieces is not None and not pieces.may_name_secret  # the frame names it
    text = stored_text(store, event, pieces)
    assert "s3cr3t" not in text and '"token":"***"' in text


def test_a_secret_name_that_could_span_two_pieces_has_the_whole_text_checked() -> None:
    """A name holding JSON's brackets or commas could be spelled across two pieces: the
    pieces' own checks say nothing then, and the joined text is checked whole."""
    odd = "a},{b"
    assert not findable_in_pieces(secret_name_set([odd]))
    assert findable_in_pieces(secret_name_set(["password"]))
    assert SessionStore(fakeredis.FakeAsyncRedis(), Keys("t"), ("password",)).piece_check
    store = SessionStore(fakeredis.FakeAsyncRedis(), Keys("t"), (odd,))
    assert store.piece_check is None  # a turn of this store's encodes no pieces
    results = [result("c0", {"n": 1}), result("c1", {"n": 2})]
    made = ResponseParts(names_secret=lambda text: False)  # pieces that claim no secret
    event = responses_event("i", "agent", results, made=made)
    pieces = made.pieces(results)
    calls: list[str] = []
    original = store.may_name_secret
    store.may_name_secret = lambda text: calls.append(text) or original(text)  # type: ignore[method-assign]
    whole = event.model_dump_json(exclude_defaults=True)
    assert stored_text(store, event, pieces) == whole
    assert calls == [whole]  # the whole text checked once, the pieces not joined
