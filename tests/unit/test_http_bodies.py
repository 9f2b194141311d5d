"""The HTTP API's request bodies take what their schema says, and nothing looser."""

from __future__ import annotations

import json
from datetime import date

import pytest
from pydantic import ValidationError

from toolfleet.orchestrator.httpapi.events import encode
from toolfleet.orchestrator.httpapi.guards import BodyLimitMiddleware
from toolfleet.orchestrator.httpapi.wire import ConfirmationAnswer, FiniteJSONResponse, json_text


@pytest.mark.parametrize(("sent", "read"), [(3, 3), (3.0, 3), (112470682847.0, 112470682847)])
def test_a_whole_number_is_an_integer_however_json_writes_it(sent: object, read: int) -> None:
    """JSON Schema's `integer`, which the OpenAPI schema gives, takes 3.0 as well as 3."""
    answer = ConfirmationAnswer.model_validate({"confirmed": True, "asked_again": sent})
    assert answer.asked_again == read and type(answer.asked_again) is int


@pytest.mark.parametrize("sent", ["3", 3.5, True, float("inf"), float("nan"), -1])
def test_what_is_no_whole_number_is_refused(sent: object) -> None:
    with pytest.raises(ValidationError):
        ConfirmationAnswer.model_validate({"confirmed": True, "asked_again": sent})


def test_the_schema_says_what_the_body_takes() -> None:
    """What clients and fuzzers read: an integer of 0 or more (JSON Schema's `minimum`)."""
    field = ConfirmationAnswer.model_json_schema()["properties"]["asked_again"]
    assert {"type": "integer", "minimum": 0} in field["anyOf"]


def test_what_json_has_no_numbers_for_is_written_as_null_in_responses_and_frames() -> None:
    """A NaN or infinity held in memory (a callback's state write) would make Python's
    writer raise (a 500) or write a token no JSON reader takes (an unreadable frame)."""
    held = {"x": float("nan"), "y": [float("inf"), 1.5], "z": "é", "at": date(2026, 1, 2)}
    response = FiniteJSONResponse({k: v for k, v in held.items() if k != "at"})
    assert json.loads(response.body) == {"x": None, "y": [None, 1.5], "z": "é"}
    frame = encode("event", held, 7).decode()
    assert frame.startswith("event: event\nid: 7\ndata: {")
    data = json.loads(frame.split("data: ", 1)[1])
    assert data == {"x": None, "y": [None, 1.5], "z": "é", "at": "2026-01-02"}
    assert json.loads(json_text({"ok": 1})) == {"ok": 1}  # the common value, as json writes it


@pytest.mark.parametrize("declared", ["\u00b2", "1\u0663", "-1", "1e3"])
async def test_a_content_length_that_is_no_count_of_bytes_gets_400(declared: str) -> None:
    """Python's `int` and `isdigit` take other scripts' digits; a server in front may not
    have refused the header already."""
    sent: list[dict[str, object]] = []

    async def route(scope: object, receive: object, send: object) -> None:
        raise AssertionError("no route runs")

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    guard = BodyLimitMiddleware(route, max_bytes=1024)  # type: ignore[arg-type]
    headers = [(b"content-length", declared.encode())]
    await guard({"type": "http", "method": "POST", "headers": headers}, receive, send)  # type: ignore[arg-type]
    assert sent[0]["status"] == 400
