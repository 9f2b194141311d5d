"""A ModelRequest's `authors` stays aligned with `contents` when a before_model callback
or a request processor replaces them (ADK's history_management sample slices them)."""

from __future__ import annotations

from google.genai import types

from toolfleet.orchestrator.models.offline import ScriptedModel, say
from toolfleet.orchestrator.models.protocol import TRANSIENT_AUTHOR, ModelRequest


def _text(role: str, text: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=text)])


ASKED, ANSWERED, QUOTED, ASKED_AGAIN = (
    _text("user", "roll"),
    _text("model", "1"),
    _text("user", "For context: ..."),
    _text("user", "again"),
)


def _request() -> ModelRequest:
    return ModelRequest(
        agent_name="roller",
        contents=[ASKED, ANSWERED, QUOTED, ASKED_AGAIN],
        authors=["user", "roller", "desk", "user"],
    )


def test_a_slice_keeps_each_kept_contents_author() -> None:
    request = _request()
    request.contents = request.contents[1:]
    assert request.authors == ["roller", "desk", "user"]


def test_copies_in_the_same_places_keep_the_authors_and_new_contents_get_their_roles() -> None:
    request = _request()
    request.contents = [c.model_copy() for c in request.contents]
    assert request.authors == ["user", "roller", "desk", "user"]

    request.contents = [_text("model", "hi"), *request.contents[2:], _text("user", "new")]
    assert request.authors == ["roller", "desk", "user", "user"]


def test_a_transient_content_is_marked_and_a_request_without_authors_keeps_none() -> None:
    request = _request()
    request.append_transient_content(_text("user", "the artifact"))
    assert request.authors == ["user", "roller", "desk", "user", TRANSIENT_AUTHOR]

    bare = ModelRequest(agent_name="roller", contents=[ASKED])
    bare.contents = [ASKED, ANSWERED]
    assert bare.authors == ()


async def test_the_offline_model_plays_a_sliced_request() -> None:
    request = _request()
    request.contents = request.contents[2:]  # what the sample's callback leaves
    model = ScriptedModel(by_message={"again": [say("twice")]})
    reply = await model.generate(request)
    assert [p.text for p in reply.parts or ()] == ["twice"]
