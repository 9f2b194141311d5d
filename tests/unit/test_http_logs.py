"""httpx's request lines with query values, URL passwords and a request's secrets masked."""

from __future__ import annotations

import logging

import httpx
import pytest

from tests.pets_api import pets_spec
from tests.unit.test_openapi_toolset import call, tools_of
from toolfleet.shared.http_logs import hidden_in_http_logs, mask_http_logs
from toolfleet.shared.messages import CallStatus
from toolfleet.shared.openapi import OpenAPIToolset


def test_httpx_request_lines_show_no_query_value_password_or_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mask_http_logs()
    url = httpx.URL("https://u:pw-1@api.test/users/s3cr3t/items?key=k-1&q=plain%20text")
    with caplog.at_level(logging.INFO, logger="httpx"):
        with hidden_in_http_logs(["s3cr3t"]):
            # As httpx logs a request (its URL an argument, not text)
            logging.getLogger("httpx").info('HTTP Request: %s %s "%s"', "GET", url, "200 OK")
        logging.getLogger("httpx").info("HTTP Request: GET %s", "https://api.test/s3cr3t")

    inside, outside = (r.getMessage() for r in caplog.records)
    assert (
        inside == 'HTTP Request: GET https://u:***@api.test/users/***/items?key=***&q=*** "200 OK"'
    )
    assert outside == "HTTP Request: GET https://api.test/s3cr3t"  # that request's own only


@pytest.mark.parametrize("name", ["httpx", "mcp.client.streamable_http", "mcp.client.sse"])
def test_the_filter_is_put_on_once(name: str) -> None:
    mask_http_logs()
    mask_http_logs()
    filters = logging.getLogger(name).filters
    assert sum(type(f).__name__ == "MaskRequestSecrets" for f in filters) == 1


def test_a_request_that_fails_is_an_error_for_the_model_naming_no_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given an API nobody listens on, and a secret-named argument in the path's query
    toolset = OpenAPIToolset(spec_dict=pets_spec("http://127.0.0.1:1"))
    args = {"pet_id": "p1", "token": "tok-7f3a"}

    with caplog.at_level(logging.INFO):
        result = call(tools_of(toolset)["get_pet"], args)

    assert result.status is CallStatus.ERROR
    assert result.response["error_type"] == "ToolError"
    message = result.response["error_message"]
    assert message.startswith("GET http://127.0.0.1:1/pets/p1 failed: ConnectError")
    assert "tok-7f3a" not in message + caplog.text
