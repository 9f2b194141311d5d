"""The HTTP API's parts that need no Redis: settings, guards, event translation, the hub."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from google.genai import types
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolfleet.orchestrator.httpapi.events import encode, event_json, event_kind
from toolfleet.orchestrator.httpapi.guards import (
    AccessMiddleware,
    BodyLimitMiddleware,
    TrustedProxies,
)
from toolfleet.orchestrator.httpapi.hub import MAX_QUEUED, SessionHub, StreamClosed
from toolfleet.orchestrator.httpapi.serving import HideTokens
from toolfleet.orchestrator.httpapi.settings import ApiKey, HttpSettings, is_loopback, parse_bind
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.keys import session_key

S1 = session_key("app", "u", "s1")
S2 = session_key("app", "u", "s2")

DEFAULTS = HttpSettings(host="127.0.0.1", port=8080, token=None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ("127.0.0.1", 8080)),
        ("0.0.0.0:9000", ("0.0.0.0", 9000)),
        (":9001", ("127.0.0.1", 9001)),
        ("localhost", ("localhost", 8080)),
        ("[::1]:9002", ("::1", 9002)),
        ("::1", ("::1", 8080)),
    ],
)
def test_bind_addresses_are_parsed_with_defaults(value: str, expected: tuple[str, int]) -> None:
    assert parse_bind(value, DEFAULTS) == expected


def test_a_bad_port_is_a_config_error_naming_the_option() -> None:
    with pytest.raises(ConfigError, match="--http 'host:http'"):
        parse_bind("host:http", DEFAULTS)


def test_listening_beyond_loopback_needs_a_token_unless_allowed() -> None:
    assert is_loopback("127.0.0.5") and is_loopback("[::1]") and not is_loopback("0.0.0.0")
    DEFAULTS.check("127.0.0.1")
    with pytest.raises(ConfigError, match="TOOLFLEET_HTTP_TOKEN"):
        DEFAULTS.check("0.0.0.0")
    HttpSettings(token="t").check("0.0.0.0")
    HttpSettings(api_keys=[ApiKey(subject="ann", key="k" * 16)]).check("0.0.0.0")
    assert not HttpSettings(token="").auth_required()


async def _echo(request: Request) -> JSONResponse:
    return JSONResponse({"bytes": len(await request.body())})


def _guarded(
    max_bytes: int,
    open_api: bool,
    peer: str = "127.0.0.1",
    proxies: tuple[str, ...] = (),
    allow_proxies: bool = False,
) -> httpx.AsyncClient:
    app = Starlette(routes=[Route("/", _echo, methods=["GET", "POST"])])
    app.add_middleware(
        AccessMiddleware,
        open_api=open_api,
        proxies=TrustedProxies(list(proxies)),
        allow_proxies=allow_proxies,
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_bytes)
    transport = httpx.ASGITransport(app, client=(peer, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


async def test_bodies_over_the_limit_get_413_declared_or_streamed() -> None:
    async with _guarded(1024, open_api=False) as client:
        assert (await client.post("/", content=b"x" * 1024)).json() == {"bytes": 1024}
        declared = await client.post("/", content=b"x" * 1025)
        assert declared.status_code == 413
        assert "TOOLFLEET_HTTP_MAX_BODY_BYTES" in declared.json()["detail"]

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(3):
                yield b"x" * 600

        streamed = await client.post("/", content=chunks())  # no Content-Length
        assert streamed.status_code == 413 and streamed.json()["status"] == 413


async def test_cross_origin_writes_and_foreign_hosts_of_an_open_api_are_refused() -> None:
    async with _guarded(1024, open_api=True) as client:
        assert (await client.post("/", headers={"Origin": "http://localhost"})).status_code == 200
        forged = await client.post("/", headers={"Origin": "http://evil.example"})
        assert forged.status_code == 403 and "cross-origin" in forged.json()["detail"]
        assert (await client.get("/", headers={"Origin": "http://evil.example"})).status_code == 200
        rebound = await client.get("/", headers={"Host": "evil.example"})
        assert rebound.status_code == 403 and "localhost" in rebound.json()["detail"]
    async with _guarded(1024, open_api=False) as client:  # a token guards it: any host
        assert (await client.get("/", headers={"Host": "api.example"})).status_code == 200


async def test_an_open_api_judges_the_peer_address_not_the_host_header() -> None:
    async with _guarded(1024, open_api=True, peer="203.0.113.9") as client:
        claimed = await client.get("/", headers={"Host": "localhost"})
        assert claimed.status_code == 403 and "'203.0.113.9'" in claimed.json()["detail"]
        # X-Forwarded-For from a peer that is not a trusted proxy is the client's say only.
        spoofed = await client.get("/", headers={"X-Forwarded-For": "127.0.0.1"})
        assert spoofed.status_code == 403
    async with _guarded(1024, open_api=True, peer="::1") as client:
        assert (await client.get("/", headers={"Host": "[::1]:8080"})).status_code == 200


async def test_forwarded_addresses_count_only_from_trusted_proxies() -> None:
    proxies = ("10.0.0.0/24",)
    async with _guarded(1024, open_api=True, peer="10.0.0.7", proxies=proxies) as client:
        # The proxy keeps the original Host: no 403 for it, the client address decides.
        local = {"Host": "api.example", "X-Forwarded-For": "198.51.100.4, 127.0.0.1"}
        assert (await client.get("/", headers=local)).status_code == 200
        remote = {"Host": "api.example", "X-Forwarded-For": "127.0.0.1, 198.51.100.4"}
        refused = await client.get("/", headers=remote)
        assert refused.status_code == 403 and "198.51.100.4" in refused.json()["detail"]
    # Behind an authenticating proxy (ALLOW_NO_AUTH): the proxy is let in, others are not.
    behind = {"open_api": True, "proxies": proxies, "allow_proxies": True}
    async with _guarded(1024, peer="10.0.0.7", **behind) as client:  # type: ignore[arg-type]
        remote = {"Host": "api.example", "X-Forwarded-For": "198.51.100.4"}
        assert (await client.get("/", headers=remote)).status_code == 200
    async with _guarded(1024, peer="10.0.1.7", **behind) as client:  # type: ignore[arg-type]
        assert (await client.get("/", headers={"Host": "api.example"})).status_code == 403


def test_allow_no_auth_beyond_loopback_needs_trusted_proxies_and_jwts_need_aud_and_iss() -> None:
    with pytest.raises(ConfigError, match="TOOLFLEET_HTTP_TRUSTED_PROXIES"):
        HttpSettings(allow_no_auth=True).check("0.0.0.0")
    HttpSettings(allow_no_auth=True, trusted_proxies=["10.0.0.1"]).check("0.0.0.0")
    with pytest.raises(ConfigError, match="AUDIENCE"):
        HttpSettings(jwt_secret="s" * 32, jwt_issuer="https://idp").check("0.0.0.0")
    with pytest.raises(ConfigError, match="32 bytes"):
        HttpSettings(jwt_secret="short", jwt_audience="a", jwt_issuer="i").check("0.0.0.0")
    with pytest.raises(ValueError, match="not an address"):
        HttpSettings(trusted_proxies="10.0.0.1, proxy.example")  # type: ignore[arg-type]


def _model(*parts: types.Part) -> types.Content:
    return types.Content(role="model", parts=list(parts))


def test_secret_call_arguments_are_masked_in_event_json() -> None:
    call = types.FunctionCall(id="c1", name="call_api", args={"api_key": "sk-1", "q": "x"})
    event = Event(invocation_id="i", author="a", content=_model(types.Part(function_call=call)))
    data = event_json(event, ["api_key"])
    assert data["content"]["parts"][0]["function_call"]["args"] == {"api_key": "***", "q": "x"}
    assert event.content is not None and call.args == {"api_key": "sk-1", "q": "x"}
    assert b"event: event\nid: 3\ndata: {" in encode("event", data, 3)


def test_each_event_has_its_kind() -> None:
    call = types.Part(function_call=types.FunctionCall(id="c", name="t", args={}))
    calling = Event(invocation_id="i", author="root", content=_model(call))
    responses = types.Content(role="user", parts=[types.Part(text="r")])
    turn = Event(invocation_id="i", author="root", content=responses)
    stopped = Event(invocation_id="i", author="root", error="stopped after max_steps=3 ...")
    parked = Event(invocation_id="i", author="root", credential_requests=[{"call_id": "c"}])
    user = Event(invocation_id="i", author="user", content=types.Content(role="user", parts=[]))
    kinds = [event_kind(e) for e in (calling, turn, stopped, parked, user)]
    assert kinds == ["model", "responses", "error", "credential", "user"]


async def test_the_hub_fans_out_by_session_and_cuts_off_a_subscriber_far_behind() -> None:
    hub = SessionHub()
    a, b, other = hub.subscribe(S1), hub.subscribe(S1), hub.subscribe(S2)
    closing = StreamClosed("x")
    hub.publish(S1, closing)
    assert a.queue.get_nowait() is closing and b.queue.get_nowait() is closing
    assert other.queue.empty()
    hub.unsubscribe(b)
    for _ in range(MAX_QUEUED + 1):
        hub.publish(S1, closing)
    (cut,) = [a.queue.get_nowait() for _ in range(a.queue.qsize())]
    assert isinstance(cut, StreamClosed) and "fell more than" in cut.reason
    assert hub.watchers(S1) == 0 and hub.watchers(S2) == 1
    hub.close()
    assert isinstance(other.queue.get_nowait(), StreamClosed)


def test_tokens_in_links_are_masked_in_access_log_lines() -> None:
    args = ("1.2.3.4:5", "GET", "/approvals?x=1&token=s3cret&y=2", "1.1", 200)
    record = logging.LogRecord("uvicorn.access", 20, "", 0, '%s - "%s %s HTTP/%s" %d', args, None)
    assert HideTokens().filter(record)
    assert record.getMessage() == '1.2.3.4:5 - "GET /approvals?x=1&token=***&y=2 HTTP/1.1" 200'
