"""ADK's session services are coroutine functions: `asyncio.run`, `await` and tasks take
what they return, and older ADK's sync `create_session` still names its session."""

from __future__ import annotations

import asyncio
import inspect
import warnings
from typing import Any

import pytest

from toolfleet.adk import BaseSessionService, InMemorySessionService, RedisSessionService
from toolfleet.orchestrator.sessions.session import Session

METHODS = (
    "create_session",
    "get_session",
    "list_sessions",
    "delete_session",
    "append_event",
    "flush",
)


class InProcess(BaseSessionService):
    """The base's `create_session` on sessions kept in a dict: the coroutine protocol
    without a Redis."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[Session] = []

    async def _create_session(
        self, *, app_name: str, user_id: str, state: dict[str, Any] | None, session_id: str
    ) -> Session:
        self._unawaited.pop((app_name, user_id, session_id), None)
        await asyncio.sleep(0)  # ok: suspends once, as a Redis round trip does
        session = Session(id=session_id, app_name=app_name, user_id=user_id, state=state or {})
        self.made.append(session)
        return session


@pytest.mark.parametrize(
    "service", [BaseSessionService, InMemorySessionService, RedisSessionService]
)
@pytest.mark.parametrize("method", METHODS)
def test_every_session_method_is_a_coroutine_function_as_adks(service: type, method: str) -> None:
    assert inspect.iscoroutinefunction(getattr(service, method))
    assert asyncio.iscoroutinefunction(getattr(service, method))
    assert inspect.iscoroutinefunction(getattr(InProcess(), method))


def test_asyncio_run_takes_create_session_as_adks_docs_write_it() -> None:
    service = InProcess()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "never awaited" left behind
        session = asyncio.run(
            service.create_session(app_name="a", user_id="u", state={"k": 1}, session_id="s1")
        )
    assert (session.id, session.state) == ("s1", {"k": 1})
    assert service.made == [session] and service._unawaited == {}


async def test_tasks_and_gather_run_a_creation_once() -> None:
    service = InProcess()
    creation = service.create_session(app_name="a", user_id="u", session_id="s2")
    assert asyncio.iscoroutine(creation)
    task = asyncio.create_task(creation)
    first, second = await asyncio.gather(task, service.create_session(app_name="a", user_id="u"))
    assert first.id == "s2" and second.id != "s2" and len(service.made) == 2
    assert await creation is first  # made once, however often awaited


async def test_an_unawaited_creation_names_its_session_and_a_runner_makes_it() -> None:
    service = InProcess()
    creation = service.create_session(app_name="a", user_id="u", session_id="s3")
    assert creation.id == "s3" and service.made == []  # older ADK's sync call
    await service.settle("a", "u", "s3")
    assert [s.id for s in service.made] == ["s3"]
    await service.settle("a", "u", "s3")
    assert len(service.made) == 1
