from __future__ import annotations

from collections.abc import AsyncIterator

import fakeredis
import pytest

from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.keys import Keys


@pytest.fixture
def fake_server() -> fakeredis.FakeServer:
    return fakeredis.FakeServer()


@pytest.fixture
async def fake_redis(fake_server: fakeredis.FakeServer) -> AsyncIterator[fakeredis.FakeAsyncRedis]:
    client = fakeredis.FakeAsyncRedis(server=fake_server)
    yield client
    await client.aclose()


@pytest.fixture
def store(fake_redis: fakeredis.FakeAsyncRedis) -> SessionStore:
    return SessionStore(fake_redis, Keys("t"))
