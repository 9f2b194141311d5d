"""Group commit: concurrent callers share pipelines, and each gets its own replies and errors."""

from __future__ import annotations

import threading
from typing import Any

import fakeredis
import pytest
import redis
from redis.backoff import NoBackoff
from redis.client import Pipeline
from redis.retry import Retry

from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.shared.group_commit import GroupCommit
from toolfleet.shared.scripts import LuaScript


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def test_a_lone_caller_gets_the_replies_to_its_own_commands(client: fakeredis.FakeRedis) -> None:
    commits = GroupCommit(client)

    def commands(pipe: Pipeline) -> None:
        pipe.incr("n")
        pipe.incr("n")
        pipe.get("n")

    assert commits.execute(commands) == [1, 2, b"2"]


def test_callers_arriving_while_a_pipeline_is_in_flight_go_together_in_the_next(
    client: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    commits = GroupCommit(client)
    pipelines: list[int] = []
    real_pipeline = client.pipeline

    def counted(*args: Any, **kwargs: Any) -> Any:
        pipelines.append(1)
        return real_pipeline(*args, **kwargs)

    monkeypatch.setattr(client, "pipeline", counted)
    replies: dict[int, list[Any]] = {}

    def first(pipe: Pipeline) -> None:
        # Its pipeline is being built: the 199 others arrive and wait for the next one.
        wait_for(lambda: len(commits._waiting) == 199, 10, "the other callers")
        pipe.set("k0", 0)
        pipe.get("k0")

    def caller(i: int) -> None:
        if i == 0:
            replies[0] = commits.execute(first)
            return
        wait_for(lambda: commits._sending, 10, "the first caller to send")
        replies[i] = commits.execute(lambda pipe: (pipe.set(f"k{i}", i), pipe.get(f"k{i}")))

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert replies == {i: [True, str(i).encode()] for i in range(200)}
    assert len(pipelines) == 2  # the first caller's, then the other 199 together


def test_a_failing_command_fails_only_its_caller(client: fakeredis.FakeRedis) -> None:
    client.set("text", "not a number")
    commits = GroupCommit(client)
    with pytest.raises(redis.ResponseError):
        commits.execute(lambda pipe: pipe.incr("text"))
    assert commits.execute(lambda pipe: pipe.incr("n")) == [1]


def test_a_callers_own_exception_is_raised_to_it_and_the_sender_goes_on(
    client: fakeredis.FakeRedis,
) -> None:
    commits = GroupCommit(client)

    def broken(pipe: Pipeline) -> None:
        pipe.incr("n")
        raise ValueError("the caller's bug")

    with pytest.raises(ValueError, match="the caller's bug"):
        commits.execute(broken)
    assert client.get("n") is None  # its commands were taken back, not sent
    assert commits.execute(lambda pipe: pipe.incr("n")) == [1]


def test_a_connection_error_reaches_every_caller_of_the_pipeline() -> None:
    # Nothing listens on port 1; no retries, so the error comes at once.
    down = redis.Redis(port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    commits = GroupCommit(down)
    with pytest.raises(redis.ConnectionError):
        commits.execute(lambda pipe: pipe.incr("n"))
    with pytest.raises(redis.ConnectionError):  # and the next caller still sends
        commits.execute(lambda pipe: pipe.incr("n"))


def test_a_script_the_server_does_not_know_yet_runs_once_by_its_text(
    client: fakeredis.FakeRedis,
) -> None:
    script = LuaScript("return redis.call('INCR', KEYS[1])")
    commits = GroupCommit(client)
    assert commits.run_script(script, 1, "n") == 1  # NOSCRIPT, then EVAL: one increment
    assert commits.run_script(script, 1, "n") == 2  # known now: by its SHA1
    assert client.get("n") == b"2"


def test_a_lone_script_goes_as_a_plain_command_and_serves_who_came_meanwhile(
    client: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prefork child's one call at a time pays for no pipeline; a caller that arrives
    while it is out is sent right after it, by the same sender."""
    commits = GroupCommit(client)
    script = LuaScript("return redis.call('INCR', KEYS[1])")
    client.script_load(script.text)
    pipelines: list[int] = []
    real_pipeline, real_command = client.pipeline, client.execute_command
    monkeypatch.setattr(
        client, "pipeline", lambda *a, **k: pipelines.append(1) or real_pipeline(*a, **k)
    )
    replies: list[Any] = []
    other = threading.Thread(target=lambda: replies.append(commits.execute(lambda p: p.get("n"))))

    def command(*args: Any, **options: Any) -> Any:
        if args[0] == "EVALSHA" and not other.is_alive() and not replies:
            other.start()  # arrives while the lone script is out
            wait_for(lambda: len(commits._waiting) == 1, 10, "the other caller to wait")
        return real_command(*args, **options)

    monkeypatch.setattr(client, "execute_command", command)
    assert commits.run_script(script, 1, "n") == 1
    other.join(10)
    assert replies == [[b"1"]]
    assert len(pipelines) == 1  # the other caller's; the lone script took none
    assert not commits._sending
