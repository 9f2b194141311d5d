"""OpenAPIToolset's bounds on what comes back: a long response reaches the model cut to the
payload limit, and a compressed one is inflated no further than the bound."""

from __future__ import annotations

import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.pets_api import PetsApi, gzip_bomb, serve_pets_api
from tests.unit.test_openapi_toolset import call, tools_of
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolServices
from toolfleet.shared.errors import ToolError
from toolfleet.shared.messages import CallStatus
from toolfleet.shared.openapi import OpenAPIToolset
from toolfleet.shared.openapi.body import json_size, read_bounded
from toolfleet.shared.openapi.request import DEFAULT_MAX_RESPONSE_BYTES


@pytest.fixture
def api() -> Iterator[PetsApi]:
    with serve_pets_api() as running:
        yield running


@pytest.fixture
def toolset(api: PetsApi) -> OpenAPIToolset:
    return OpenAPIToolset(spec_str=httpx.get(f"{api.url}/openapi.json").text)


@pytest.mark.parametrize(
    ("limit", "fill"), [(256 * 1024, "x"), (256 * 1024, '"'), (20_000, "é"), (20_000, "\n")]
)
def test_a_response_over_the_payload_limit_reaches_the_model_cut_to_fit(
    toolset: OpenAPIToolset, limit: int, fill: str
) -> None:
    # Given a response of a million characters (escaped in JSON for some), on a worker
    # whose results may be `limit` bytes of JSON
    services = ToolServices(settings=Settings(max_payload_bytes=limit))
    args = {"size": 1_000_000, "fill": fill}

    result = call(tools_of(toolset)["get_big"], args, services, max_result_bytes=limit)

    # Then the model gets it cut, marked, within the limit and filling it
    assert result.status is CallStatus.SUCCESS, result.response
    response = result.response
    assert response["truncated"] is True and response["status_code"] == 200
    assert limit - 64 < json_size(response) <= limit
    served = json.dumps({"data": fill * 1_000_000})
    assert response["body"] == served[: len(response["body"])]


def test_a_compressed_body_is_inflated_no_further_than_the_bound(
    api: PetsApi, toolset: OpenAPIToolset
) -> None:
    # Given 200 MiB of zeros sent as about 200 KB of gzip
    tool = tools_of(toolset)["get_bomb"]
    gzip_bomb()  # made before measuring
    tracemalloc.start()
    try:
        result = call(tool, {})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    # Then the call ends at the bound, having held a few MiB at most
    assert peak < 16 << 20, f"peak {peak >> 20} MiB"
    assert result.status is CallStatus.SUCCESS
    assert result.response["truncated"] is True
    assert result.response["body"] == "\0" * len(result.response["body"])
    assert 0 < len(result.response["body"]) <= DEFAULT_MAX_RESPONSE_BYTES
    assert api.seen[-1]["accept-encoding"] == "gzip, deflate"


def _answer(data: bytes, headers: dict[str, str]) -> httpx.MockTransport:
    """A transport answering `data` with `headers`, streamed a KB at a time."""

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(data), 1000):
            yield data[start : start + 1000]

    return httpx.MockTransport(lambda _: httpx.Response(200, content=chunks(), headers=headers))


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


BODY = b"0123456789" * 5000


@pytest.mark.parametrize(
    ("coding", "sent"),
    [
        ("", BODY),
        ("identity", BODY),
        ("gzip", zlib.compress(BODY, wbits=zlib.MAX_WBITS | 16)),
        ("deflate", zlib.compress(BODY)),
        ("deflate", _raw_deflate(BODY)),
    ],
)
@pytest.mark.parametrize("bound", [len(BODY), len(BODY) - 1, 7])
async def test_each_coding_is_decoded_up_to_the_bound(coding: str, sent: bytes, bound: int) -> None:
    headers = {"Content-Encoding": coding} if coding else {}
    transport = _answer(sent, headers)
    async with (
        httpx.AsyncClient(transport=transport) as client,
        client.stream("GET", "http://api.test/") as response,
    ):
        body, truncated = await read_bounded(response, bound)

    assert body == BODY[:bound]
    assert truncated is (bound < len(BODY))


async def test_a_coding_not_asked_for_is_an_error_for_the_model() -> None:
    transport = _answer(b"x", {"Content-Encoding": "br"})
    async with (
        httpx.AsyncClient(transport=transport) as client,
        client.stream("GET", "http://api.test/") as response,
    ):
        with pytest.raises(ToolError, match="Content-Encoding 'br'"):
            await read_bounded(response, 100)


def test_a_cut_inside_a_secret_shows_none_of_it(api: PetsApi, toolset: OpenAPIToolset) -> None:
    # Given a response echoing a secret-named argument, cut five characters into it
    token = "tok-0123456789abcdef"
    served = json.dumps({"id": "p1", "name": "Rex", "query": {"token": [token]}})
    bounded = OpenAPIToolset(
        spec_str=httpx.get(f"{api.url}/openapi.json").text,
        max_response_bytes=served.index(token) + 5,
    )

    result = call(tools_of(bounded)["get_pet"], {"pet_id": "p1", "token": token})

    assert result.response["truncated"] is True
    assert result.response["body"] == served[: served.index(token)]
