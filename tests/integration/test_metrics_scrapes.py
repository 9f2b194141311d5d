"""`/metrics` needs no caller: however many scrapes come at once, the fleet's gauges are
read by one set of reads at a time."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from examples import reimbursement
from toolfleet.orchestrator.fleet import gauges
from toolfleet.orchestrator.httpapi import HttpApi, HttpSettings, serve_http, serving
from toolfleet.shared.config import Settings

pytestmark = pytest.mark.integration

SCRAPES = 20


async def test_concurrent_scrapes_share_one_read_of_the_fleet(
    settings: Settings, orchestrator_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    arrived, every_scrape_came = 0, asyncio.Event()
    reading, most = 0, 0
    real_build, real_read = serving.build_app, gauges.refresh_fleet_gauges

    def counting_app(api: HttpApi) -> ASGIApp:
        app = real_build(api)

        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            nonlocal arrived
            if scope["type"] == "http" and scope["path"] == "/metrics":
                arrived += 1
                if arrived == SCRAPES:
                    every_scrape_came.set()
            await app(scope, receive, send)

        return counted

    async def held_read(*args: Any) -> None:
        nonlocal reading, most
        reading += 1
        most = max(most, reading)
        try:
            await every_scrape_came.wait()  # the first read lasts until every scrape came
            await real_read(*args)
        finally:
            reading -= 1

    monkeypatch.setattr(serving, "build_app", counting_app)
    monkeypatch.setattr(gauges, "refresh_fleet_gauges", held_read)
    http = HttpSettings(token="metrics-" + uuid.uuid4().hex)
    async with (
        serve_http([reimbursement.agent], settings, http, "127.0.0.1", 0) as running,
        httpx.AsyncClient(base_url=running.url, timeout=30) as client,  # no token needed
    ):
        answers = await asyncio.gather(*(client.get("/metrics") for _ in range(SCRAPES)))
    assert [a.status_code for a in answers] == [200] * SCRAPES
    assert all(b"toolfleet_live_workers" in a.content for a in answers)
    assert most == 1
