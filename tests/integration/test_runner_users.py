"""A session id names a session only within its app and user, as in ADK's session
services: through the Python API and ADK's session service, another user's session of
the same id is another session (the HTTP API's side is in test_http_access.py)."""

from __future__ import annotations

import uuid

import pytest

from toolfleet.adk import RedisSessionService
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import ScriptedModel, say
from toolfleet.orchestrator.models.protocol import text_of
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import session_key

pytestmark = pytest.mark.integration


def texts(session: Session) -> list[str]:
    return [text_of(e.content) for e in session.events if e.content]


async def test_two_users_of_one_session_id_each_run_a_session_of_their_own(
    settings: Settings,
) -> None:
    """Bob using the id of ann's session neither is refused nor reaches hers: he gets a
    session of his own, and the model sees nothing of ann's."""
    model = ScriptedModel([say("noted")])
    agent = Agent(name="diary", tools=[], model=model)
    session_id = f"diary-{uuid.uuid4().hex}"
    anns, bobs = (session_key("diary", user, session_id) for user in ("ann", "bob"))
    async with Runner(agent, settings) as runner:
        assert await runner.ask(user_id="ann", session_id=session_id, message="my pin is 1234")
        asked = "what is ann's pin?"
        assert await runner.ask(user_id="bob", session_id=session_id, message=asked) == "noted"
        assert "1234" not in str(model.requests[-1].contents)  # bob's turn: none of ann's
        ann, bob = await runner.store.get(anns), await runner.store.get(bobs)
        assert (ann.user_id, texts(ann)) == ("ann", ["my pin is 1234", "noted"])
        assert (bob.user_id, texts(bob)) == ("bob", [asked, "noted"])
        assert await runner.leases.unleased([anns, bobs]) == [anns, bobs]  # none left held
        assert await runner.store.sessions_to_resume() == []


async def test_the_adk_session_service_keys_sessions_by_app_user_and_id(
    settings: Settings,
) -> None:
    """Creating, reading and deleting bob's session of ann's id touches only bob's."""
    service = RedisSessionService(settings)
    session_id = f"s-{uuid.uuid4().hex}"
    await service.create_session(
        app_name="diary", user_id="ann", session_id=session_id, state={"pin": "1234"}
    )
    bob = await service.create_session(app_name="diary", user_id="bob", session_id=session_id)
    assert (bob.id, bob.user_id, bob.state) == (session_id, "bob", {})
    got = await service.get_session(app_name="diary", user_id="bob", session_id=session_id)
    assert got is not None and got.state == {} and got.events == []
    await service.delete_session(app_name="diary", user_id="bob", session_id=session_id)
    assert await service.get_session(app_name="diary", user_id="bob", session_id=session_id) is None
    ann = await service.get_session(app_name="diary", user_id="ann", session_id=session_id)
    assert ann is not None and ann.state == {"pin": "1234"}  # bob's delete left hers whole
    listed = await service.list_sessions(app_name="diary", user_id="ann")
    assert session_id in [s.id for s in listed.sessions]


async def test_the_adk_session_service_lists_every_users_sessions_without_a_user(
    settings: Settings,
) -> None:
    """As ADK's services do, `list_sessions` with no user lists the app's sessions of
    every user (a user id holding a glob's characters included), and no other app's."""
    service = RedisSessionService(settings)
    app = f"ledger-{uuid.uuid4().hex}"
    users = ["ann", "b*b", "c:d/e"]
    for user in users:
        await service.create_session(app_name=app, user_id=user, session_id="s1", state={"u": user})
    await service.create_session(app_name=f"{app}-other", user_id="ann", session_id="s2")
    listed = await service.list_sessions(app_name=app)
    assert sorted((s.user_id, s.id, s.state["u"]) for s in listed.sessions) == [
        (user, "s1", user) for user in sorted(users)
    ]
    assert all(s.events == [] for s in listed.sessions)
    star = await service.list_sessions(app_name=app, user_id="b*b")
    assert [s.user_id for s in star.sessions] == ["b*b"]
