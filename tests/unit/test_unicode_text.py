"""Text UTF-8 cannot carry (lone surrogates) from a user, a model or a tool: replaced by
U+FFFD where it comes in, so the turn is stored, sent and answered."""

from __future__ import annotations

from typing import Any

from tests.unit.test_deep_calls import deep_agent
from tests.unit.test_loop import responses, run
from toolfleet.orchestrator.contents import call_part, content, encodable, text_part
from toolfleet.orchestrator.models.offline import Call, call, say
from toolfleet.orchestrator.models.protocol import function_calls, text_of
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.unicode_text import has_lone_surrogates, replaced, without_lone_surrogates

LONE = "\ud800"
ESCAPED = b"caf\xe9".decode("utf-8", "surrogateescape")  # "caf\udce9"


def test_lone_surrogates_are_replaced_and_pairs_joined() -> None:
    assert has_lone_surrogates(LONE) and has_lone_surrogates(ESCAPED)
    assert not has_lone_surrogates("café \U0001f600")
    assert replaced(f"a{LONE}b") == "a\ufffdb"
    assert replaced(ESCAPED) == "caf\ufffd"
    assert replaced("\ud83d\ude00") == "\U0001f600"  # a pair held as two code units
    clean = "plain é"
    assert replaced(clean) is clean


def test_every_string_of_a_value_is_replaced_keys_too_and_clean_values_kept() -> None:
    value: dict[str, Any] = {"a": ["ok", f"x{LONE}"], f"k{LONE}": ({"n": 1},), "n": 2}
    assert without_lone_surrogates(value) == {
        "a": ["ok", "x\ufffd"],
        "k\ufffd": ({"n": 1},),
        "n": 2,
    }
    clean: dict[str, Any] = {"a": ["ok", {"b": 1.5, "c": None}]}
    assert without_lone_surrogates(clean) is clean


def test_a_content_is_made_encodable_part_by_part() -> None:
    made = content(
        "model", [text_part(f"hi {LONE}"), call_part("f", {"a": ESCAPED}), call_part("g", {})]
    )
    fixed = encodable(made)
    assert fixed.model_dump_json()  # serializes now
    assert text_of(fixed) == "hi \ufffd"
    assert [c.args for c in function_calls(fixed)] == [{"a": "caf\ufffd"}, {}]
    assert fixed.parts is not None and made.parts is not None
    assert fixed.parts[2] is made.parts[2]  # a clean part is kept as it is
    clean = content("model", [text_part("fine")])
    assert encodable(clean) is clean


async def test_a_users_and_a_models_lone_surrogates_do_not_stop_the_turn(
    store: SessionStore,
) -> None:
    agent = deep_agent(call(Call("keep", {"data": {"title": ESCAPED}})), say(f"kept {LONE}"))
    updates, _, key = await run(store, agent, f"keep this {LONE}")

    (kept,) = responses(updates)
    assert kept.response == {"result": "kept"}
    turns = [u for u in updates if isinstance(u, Event) and u.content is not None]
    assert text_of(turns[0].content) == "keep this \ufffd"  # the user's message, stored
    assert function_calls(turns[1].content)[0].args == {"data": {"title": "caf\ufffd"}}  # type: ignore[arg-type]
    assert text_of(turns[-1].content) == "kept \ufffd"
    stored = await store.get(key)
    assert [e.author for e in stored.events] == ["user", "deep", "deep", "deep"]
