"""A user's credential never reaches the model in an error, however the error spells it:
a key pasted with a line break makes httpx refuse the header, quoting it escaped."""

from __future__ import annotations

import fakeredis
import httpx
import pytest

from tests.pets_api import serve_pets_api
from tests.unit.test_openapi_toolset import PETS_AUTH, call, tools_of
from toolfleet.shared.auth import CredentialStore, new_credential_key
from toolfleet.shared.context import ToolServices
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import CallStatus
from toolfleet.shared.openapi import OpenAPIToolset

SESSION = session_key("app", "u", "s")


@pytest.mark.parametrize("pasted", ["k-123\n", "k-123\r\n", "k-123\x00"])
def test_a_credential_with_a_control_character_is_never_shown_to_the_model(pasted: str) -> None:
    # Given a user who pasted their key with a line break (the HTTP API and ADK's
    # response take it as it is; only the CLI strips it)
    secret = "TOPSECRET-" + pasted
    store = CredentialStore(fakeredis.FakeRedis(), Keys("t"), new_credential_key())
    store.put("app", "u", PETS_AUTH, secret)
    with serve_pets_api() as api:
        spec = httpx.get(f"{api.url}/openapi.json").text
        tools = tools_of(OpenAPIToolset(spec_str=spec, auth=PETS_AUTH))

        result = call(tools["get_pet"], {"pet_id": "p1"}, ToolServices(credentials=store))

    # Then the call fails, but the model's error response (stored in the session,
    # logged, sent to the model's provider) does not hold the key
    assert result.status is CallStatus.ERROR
    assert "TOPSECRET" not in str(result.response)
