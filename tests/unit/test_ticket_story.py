"""The words around a ticket for the approvals page: the user's message that started the
invocation, what the agent said when it made the long-running call, and the timeline link."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from google.genai import types

from toolfleet.orchestrator.httpapi.routes_tickets import timeline_link
from toolfleet.orchestrator.httpapi.ticket_story import MAX_TEXT_CHARS, story_of
from toolfleet.orchestrator.httpapi.wire import Ticket
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.messages import PendingCall


def said(invocation: str, author: str, text: str, role: str = "model") -> Event:
    content = types.Content(role=role, parts=[types.Part(text=text)])
    return Event(invocation_id=invocation, author=author, content=content)


def asked(invocation: str, text: str) -> Event:
    return said(invocation, "user", text, role="user")


def calls(invocation: str, call_id: str, text: str | None = None) -> Event:
    parts = [types.Part(text=text)] if text else []
    call = types.FunctionCall(id=call_id, name="ask_for_approval", args={"amount": 250})
    parts.append(types.Part(function_call=call))
    content = types.Content(role="model", parts=parts)
    return Event(invocation_id=invocation, author="agent", content=content)


def responded(invocation: str, call_id: str) -> Event:
    response = types.FunctionResponse(id=call_id, name="ask_for_approval", response={"s": 1})
    content = types.Content(role="user", parts=[types.Part(function_response=response)])
    return Event(invocation_id=invocation, author="agent", content=content)


def session_of(*events: Event) -> Session:
    session = Session(id="s 1", app_name="app", user_id="ann&bob")
    session.events.extend(events)
    return session


def pending(call_id: str = "c1", invocation: str = "inv2") -> PendingCall:
    return PendingCall(
        call_id=call_id, tool="ask_for_approval", session_id="s 1", app_name="app",
        user_id="ann&bob", agent="agent", invocation_id=invocation, ticket={}, created_at=0.0,
    )  # fmt: skip


def test_the_user_message_of_the_invocation_and_the_text_of_the_calling_turn() -> None:
    session = session_of(
        asked("inv1", "Reimburse $20 for a taxi"),
        said("inv1", "agent", "Done: $20.00 for a taxi."),
        asked("inv2", "Reimburse $250 for a team meal"),
        calls("inv2", "c1", "That is above $100: I am asking a manager."),
        responded("inv2", "c1"),
        said("inv2", "agent", "I asked Sean Zhou; I will continue once they decide."),
    )
    story = story_of(session, pending())
    assert story.asked == "Reimburse $250 for a team meal"
    assert story.agent_said == "That is above $100: I am asking a manager."


def test_without_text_in_the_calling_turn_the_last_text_before_it_then_the_first_after() -> None:
    before = session_of(
        asked("inv2", "Reimburse $250"),
        said("inv2", "agent", "Let me check the policy first."),
        calls("inv2", "c1"),
        responded("inv2", "c1"),
        said("inv2", "agent", "I asked a manager."),
    )
    assert story_of(before, pending()).agent_said == "Let me check the policy first."
    after = session_of(
        said("inv1", "agent", "An earlier invocation's words."),
        asked("inv2", "Reimburse $250"),
        calls("inv2", "c1"),
        responded("inv2", "c1"),
        said("inv2", "agent", "I asked a manager."),
    )
    assert story_of(after, pending()).agent_said == "I asked a manager."


def test_a_session_without_the_call_or_any_words_tells_nothing() -> None:
    assert story_of(session_of(asked("inv2", "hello")), pending()).asked is None
    bare = story_of(session_of(calls("inv2", "c1"), responded("inv2", "c1")), pending())
    assert (bare.asked, bare.agent_said) == (None, None)


def test_long_texts_are_cut() -> None:
    session = session_of(asked("inv2", "x" * 10_000), calls("inv2", "c1", "y" * 10_000))
    story = story_of(session, pending())
    assert story.asked is not None and story.agent_said is not None
    assert len(story.asked) == len(story.agent_said) == MAX_TEXT_CHARS
    assert story.asked.endswith("…")


def test_the_timeline_link_names_the_session_quoted() -> None:
    link = urlsplit(timeline_link(pending()))
    assert link.path == "timeline"
    assert parse_qs(link.query) == {"app": ["app"], "user": ["ann&bob"], "session": ["s 1"]}


def test_a_ticket_has_no_story_or_link_until_a_route_fills_them() -> None:
    shown = Ticket.of(pending(), ["api_key"], now=1.0)
    assert (shown.asked, shown.agent_said, shown.timeline) == (None, None, None)
