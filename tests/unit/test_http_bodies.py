"""The HTTP API's request bodies take what their schema says, and nothing looser."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolfleet.orchestrator.httpapi.wire import ConfirmationAnswer


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
