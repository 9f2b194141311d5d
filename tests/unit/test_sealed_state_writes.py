"""State written over HTTP may not carry a sealed token: the store keeps sealed values as
they are and a worker opens them for the tool, so a token copied from another user's
call or state would hand their secret to this session's tools."""

from __future__ import annotations

from typing import Any

import pytest

from toolfleet.orchestrator.httpapi.callers import OPERATOR, Caller
from toolfleet.orchestrator.httpapi.errors import ApiError
from toolfleet.orchestrator.httpapi.routes_adk import refuse_state_write
from toolfleet.shared.sealing import Sealer

SEALER = Sealer("k" * 64, ["api_key"])
ALICES = SEALER.seal({"api_key": "alice-secret"})["api_key"]  # as a task message carries it
BOB = Caller.of("bob", [])


def test_a_sealed_value_a_state_write_carries_would_open_as_its_owners_secret() -> None:
    # Why it is refused: sealing keeps it, and opening it gives Alice's secret.
    stored = SEALER.seal({"api_key": ALICES})
    assert SEALER.unseal(stored) == {"api_key": "alice-secret"}


@pytest.mark.parametrize(
    "state",
    [
        {"api_key": ALICES},
        {"user:api_key": ALICES},
        {"profile": {"keys": [{"api_key": ALICES}]}},
        {"note": {"$sealed": "not even a token"}},
    ],
    ids=["top", "user scope", "nested", "any"],
)
@pytest.mark.parametrize("caller", [BOB, OPERATOR], ids=["user", "admin"])
def test_a_state_write_holding_a_sealed_value_is_refused(
    state: dict[str, Any], caller: Caller
) -> None:
    with pytest.raises(ApiError) as caught:
        refuse_state_write(caller, state)
    assert caught.value.status == 422 and "'$sealed' is reserved" in caught.value.detail


def test_plain_state_and_secrets_in_clear_are_written() -> None:
    refuse_state_write(BOB, {"api_key": "bobs-own", "user:tier": "gold", "n": [1, {"a": 2}]})
    refuse_state_write(BOB, None)
    with pytest.raises(ApiError) as caught:
        refuse_state_write(BOB, {"app:notice": "x"})
    assert caught.value.status == 403
