"""A before_model callback may change `llm_request.contents` in place, as ADK's list
allows: the authors the offline model reads follow the contents kept."""

from __future__ import annotations

from google.genai import types

from toolfleet.orchestrator.models.protocol import ModelRequest


def content(role: str, text: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=text)])


def test_contents_deleted_in_place_keep_their_authors() -> None:
    contents = [content("user", "hi"), content("model", "from helper"), content("user", "go")]
    request = ModelRequest(agent_name="a", contents=contents, authors=["user", "helper", "user"])
    del request.contents[:1]
    assert request.aligned_authors() == ["helper", "user"]


def test_a_content_added_in_place_is_the_users_or_the_agents() -> None:
    request = ModelRequest(agent_name="a", contents=[content("user", "hi")], authors=["user"])
    request.contents.append(content("model", "added"))
    request.contents.append(content("user", "added too"))
    assert request.aligned_authors() == ["user", "a", "user"]


def test_no_authors_stay_none() -> None:
    request = ModelRequest(agent_name="a", contents=[content("user", "hi")])
    assert request.aligned_authors() == []
