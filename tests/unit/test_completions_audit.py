"""Posting and applying completions against what a careless or hostile poster sends:
another user's calls, oversized or repeated posts, and what they leave in Redis."""

from __future__ import annotations

import argparse
import io
import time
from types import SimpleNamespace
from typing import Any, cast

import fakeredis
import pytest

from tests.support import until
from toolfleet.orchestrator.cli import tickets
from toolfleet.orchestrator.cli.main import main
from toolfleet.orchestrator.cli.tickets import add_ticket_commands
from toolfleet.orchestrator.completions.listener import CompletionListener
from toolfleet.orchestrator.httpapi.wire import ConfirmationAnswer, Ticket
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.mcpserve.final_results import FinalResults
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.auth import new_credential_key
from toolfleet.shared.completions import Completions
from toolfleet.shared.confirmation import SERVED_AGENT
from toolfleet.shared.errors import (
    AwaitingConfirmationError,
    CompletionError,
    InvalidCompletionError,
)
from toolfleet.shared.keys import Keys, SessionKey, session_key
from toolfleet.shared.messages import Completion, PendingCall
from toolfleet.shared.pending import SWEEP_CHUNK, PendingCalls

KEYS = Keys("t")
MINE = session_key("app", "mcp", "mcp-r1")  # a session `toolfleet mcp serve` made


def call(call_id: str, session: SessionKey = MINE, **update: Any) -> PendingCall:
    app, user, session_id = session.split("/")
    fields: dict[str, Any] = {
        "call_id": call_id, "tool": "open_ticket", "session_id": session_id,
        "app_name": app, "user_id": user, "agent": SERVED_AGENT, "invocation_id": "i",
        "ticket": {"status": "pending"}, "created_at": time.time(),
    }  # fmt: skip
    return PendingCall(**(fields | update))


@pytest.mark.parametrize("kind", ["result", "confirmation"])
def test_a_served_call_of_another_user_is_unknown_to_toolfleet_result(kind: str) -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    theirs = session_key("app", "ann", "mcp-r2")  # a server running as user `ann`
    assert completions.register(call("c1", theirs, kind=kind, ticket={"hint": "ok?"}))
    if kind == "result":
        completions.post_result("c1", {"secret": "for ann only"})
    else:
        completions.confirm("c1", True)
    results = FinalResults(client, KEYS, completions, "app", "mcp")

    fetched = results.fetch("c1")

    assert fetched == {
        "status": "error",
        "error_type": "UnknownCall",
        "error_message": "no pending call with id 'c1'",
    }
    assert completions.find("c1") is not None  # still ann's to fetch
    assert completions.waiting(completions.get("c1"))


def test_a_served_call_of_this_user_is_handed_over() -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    assert completions.register(call("c1"))
    completions.post_result("c1", {"answer": 42})
    results = FinalResults(client, KEYS, completions, "app", "mcp")

    assert results.fetch("c1") == {"answer": 42}
    assert completions.find("c1") is None


TTL_S = 100
ANN, BOB = session_key("app", "ann", "s1"), session_key("app", "bob", "s2")


async def test_a_ticket_whose_session_expired_is_removed_without_a_completion(
    fake_server: fakeredis.FakeServer,
    fake_redis: fakeredis.FakeAsyncRedis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session idle past its time to live (its call waits for a result that never
    comes) expires; its ticket would stay in the pending hash and the age index for
    good, listed as pending. The listener removes it, and no other. So goes a call of
    `toolfleet mcp serve` as old, whose client never fetched the result posted for it:
    no orchestrator reads its stream, which filled up until it refused every post."""
    sync = fakeredis.FakeRedis(server=fake_server)
    await SessionStore(fake_redis, KEYS).create("app", "bob", "s2")
    completions = Completions(sync, KEYS)
    old = time.time() - 2 * TTL_S
    for pending in (
        call("a1", ANN, agent="root", created_at=old),  # its session expired
        call("a2", ANN, agent="root"),  # made within the TTL: its session may come back
        call("b1", BOB, agent="root", created_at=old),  # its session lives on
        call("m1", created_at=old),  # `mcp serve`'s, never fetched
        call("m2"),  # `mcp serve`'s, made within the TTL
    ):
        assert completions.register(pending)
    completions.post_result("m1", {"answer": 1})
    kept = completions.post_result("m2", {"answer": 2})
    runner = SimpleNamespace(settings=SimpleNamespace(secret_arg_names=(), max_json_depth=64))
    # A replica of another app: no orchestrator reads the served calls' stream.
    listener = CompletionListener(
        {"agents": cast(Runner, runner)}, fake_redis, KEYS, "replica-1",
        block_ms=20, owed_scan_s=3600, claim_idle_ms=100, session_ttl_s=TTL_S,
    )  # fmt: skip
    monkeypatch.setattr(listener.resumer, "resume_owed", nothing_owed)

    await listener.start()
    try:
        await until(
            lambda: completions.find("a1") is None and completions.find("m1") is None,
            "the expired tickets removed",
            10,
        )
    finally:
        await listener.stop()

    assert {c.call_id for c in completions.pending()} == {"a2", "b1", "m2"}
    indexed = {m.decode() for m in sync.zrange(KEYS.pending_by_age(), 0, -1)}
    assert indexed == {"a2", "b1", "m2"}
    assert [e.decode() for e, _ in sync.xrange(KEYS.completions("app"))] == [kept]
    assert [e.decode() for e in sync.lrange(KEYS.completion_order(MINE), 0, -1)] == [kept]
    assert sync.exists(KEYS.closed(ANN, "a1"))  # a late result for it is refused
    with pytest.raises(CompletionError, match="no pending call with id 'a1'"):
        completions.post_result("a1", {"status": "approved"})


async def test_the_sweep_goes_past_old_tickets_of_live_sessions(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    await SessionStore(fake_redis, KEYS).create("app", "bob", "s2")
    pending = PendingCalls(KEYS)
    old = time.time() - 2 * TTL_S
    calls = [call(f"b{n}", BOB, agent="root", created_at=old + n) for n in range(SWEEP_CHUNK)]
    calls.append(call("a1", ANN, agent="root", created_at=old + SWEEP_CHUNK))
    for each in calls:
        await fake_redis.hset(KEYS.pending(), each.call_id, pending.record(each))
        await fake_redis.zadd(KEYS.pending_by_age(), {each.call_id: each.created_at})
    await fake_redis.set(KEYS.pending_indexed(), "2")
    before = time.time() - TTL_S

    dropped, after = await pending.asweep_orphans(fake_redis, before)
    assert (dropped, after) == (0, old + SWEEP_CHUNK - 1)
    assert await pending.asweep_orphans(fake_redis, before, after) == (1, None)
    assert not await fake_redis.hexists(KEYS.pending(), "a1")
    assert await fake_redis.hlen(KEYS.pending()) == SWEEP_CHUNK


@pytest.mark.parametrize(
    ("post", "what"),
    [
        (lambda c: c.post_result("a1", {"n": 10**5000}), "the result"),
        (lambda c: c.post_result("a1", {"n": [-(10**4400)]}, final=False), "the result"),
    ],
)
def test_a_result_the_orchestrator_could_not_read_is_refused_when_posted(
    post: Any, what: str
) -> None:
    """An integer of more digits than JSON readers take (a program's Python int): the
    post was accepted, then the orchestrator could not read the entry and dead-lettered
    it, so the call never got the result its poster was told was queued."""
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    assert completions.register(call("a1", ANN, agent="root"))

    with pytest.raises(InvalidCompletionError, match=rf"^{what} holds a value"):
        post(completions)

    assert client.xlen(KEYS.completions("app")) == 0
    ((_, letter),) = client.xrange(KEYS.dead_letters())
    assert letter[b"reason"].startswith(f"{what} holds a value".encode())
    assert len(letter[b"completion"]) < 1000  # kept without the value
    assert completions.find("a1") is not None


def test_a_confirmation_payload_the_orchestrator_could_not_read_is_refused() -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    asking = call("a1", ANN, agent="root", kind="confirmation", ticket={"hint": "ok?"})
    assert completions.register(asking)

    with pytest.raises(InvalidCompletionError, match=r"^the payload holds a value"):
        completions.confirm("a1", True, payload={"n": 10**5000})

    assert client.xlen(KEYS.completions("app")) == 0


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["complete", "a1", "--json"], "--json"),
        (["confirm", "a1", "--payload"], "--payload"),
    ],
)
def test_the_cli_refuses_an_integer_json_cannot_read_saying_so(
    command: list[str], option: str
) -> None:
    """Python's JSON reader takes at most 4300 digits: past that, the operator got a
    traceback."""
    parser = argparse.ArgumentParser()
    add_ticket_commands(parser.add_subparsers())
    args = parser.parse_args(["tickets", *command, '{"n": ' + "9" * 5000 + "}"])

    with pytest.raises(InvalidCompletionError, match=rf"^{option} is not valid JSON: .*4300"):
        args.func(args)


def test_a_confirmation_of_a_question_asked_before_is_refused_when_posted() -> None:
    """Approver B looks at the call's question; approver A confirms it, and the tool asks
    again (a new question, another payload). B's yes, posted now, named no question: it
    answered the new one. Naming the question B saw, it is refused and kept."""
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    asking = call("a1", ANN, agent="root", kind="confirmation", ticket={"hint": "$10,000?"})
    assert completions.register(asking.model_copy(update={"asked_again": 1}))

    with pytest.raises(AwaitingConfirmationError, match="asked again since the question"):
        completions.confirm("a1", True, payload={"amount": 10}, asked=0)

    assert client.xlen(KEYS.completions("app")) == 0
    ((_, letter),) = client.xrange(KEYS.dead_letters())
    assert b"asked again since the question answered was shown" in letter[b"reason"]
    entry_id = completions.confirm("a1", True, asked=1)
    ((_, fields),) = client.xrange(KEYS.completions("app"), entry_id, entry_id)
    assert Completion.model_validate_json(fields[b"completion"]).asked_again == 1


@pytest.mark.parametrize("command", [["confirm"], ["approve"], ["reject"]])
def test_the_cli_answers_only_the_question_it_names(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator reads `tickets list` (question 0), the tool asks again meanwhile: the
    answer naming question 0 is refused; `tickets list` shows the question now asked,
    and the answer naming it is posted."""
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    asking = call("a1", ANN, agent="root", kind="confirmation", ticket={"hint": "$10,000?"})
    assert completions.register(asking.model_copy(update={"asked_again": 1}))
    monkeypatch.setattr(tickets, "operator_completions", lambda: (completions, client))

    assert main(["tickets", *command, "a1", "--asked", "0"]) != 0
    assert "asked again since" in capsys.readouterr().err
    assert client.xlen(KEYS.completions("app")) == 0
    assert main(["tickets", "list"]) == 0
    assert "question 1  hint: $10,000?" in capsys.readouterr().out
    assert main(["tickets", *command, "a1", "--asked", "1"]) == 0
    ((_, fields),) = client.xrange(KEYS.completions("app"))
    assert Completion.model_validate_json(fields[b"completion"]).asked_again == 1


def test_the_cli_supplies_a_credential_only_for_the_request_it_names(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)
    asking = call("a1", ANN, agent="root", kind="credential", ticket={"key": "bank_api"})
    assert completions.register(asking.model_copy(update={"asked_again": 1}))
    monkeypatch.setattr(tickets, "operator_completions", lambda: (completions, client))
    monkeypatch.setenv("TOOLFLEET_CREDENTIAL_KEY", new_credential_key())

    monkeypatch.setattr("sys.stdin", io.StringIO("tok-1\n"))
    assert main(["tickets", "credential", "a1", "--stdin", "--asked", "0"]) != 0
    assert "asked again since" in capsys.readouterr().err
    assert client.xlen(KEYS.completions("app")) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("tok-1\n"))
    assert main(["tickets", "credential", "a1", "--stdin", "--asked", "1"]) == 0
    assert client.xlen(KEYS.completions("app")) == 1


def test_a_ticket_shows_the_question_a_confirmation_names() -> None:
    asked = call("a1", ANN, kind="confirmation", ticket={"hint": "?"}, asked_again=2)
    assert Ticket.of(asked, ()).asked_again == 2
    assert ConfirmationAnswer.model_validate({"confirmed": True, "asked_again": 2}).asked_again == 2


async def nothing_owed() -> None:
    return None


LONE = "tf-\udcff"  # a call id as a shell passes undecodable bytes, or JSON's "\ud800"


def test_a_call_id_utf8_cannot_carry_names_no_call_at_every_entry() -> None:
    """Such an id reached Redis as it was and the client raised UnicodeEncodeError: a
    traceback for `toolfleet tickets`, a 500 for ADK's `/run`, a failed MCP tool."""
    client = fakeredis.FakeRedis()
    completions = Completions(client, KEYS)

    assert completions.find(LONE) is None
    assert completions.answered_in(LONE) is None
    with pytest.raises(CompletionError, match="no pending call with id 'tf-\ufffd'"):
        completions.get(LONE)
    for post in (
        lambda: completions.post_result(LONE, {"status": "approved"}),
        lambda: completions.confirm(LONE, True),
        lambda: completions.cancel(LONE),
    ):
        with pytest.raises(CompletionError, match="no pending call with id 'tf-\ufffd'"):
            post()
    letters = client.xrange(KEYS.dead_letters())
    assert [Completion.model_validate_json(f[b"completion"]).call_id for _, f in letters] == [
        "tf-\ufffd"
    ] * 3
    fetched = FinalResults(client, KEYS, completions, "app", "mcp").fetch(LONE)
    assert isinstance(fetched, dict) and fetched["error_type"] == "UnknownCall"
