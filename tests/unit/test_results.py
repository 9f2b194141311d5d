"""ResultWaiter: one XREAD for many calls; malformed and late entries harm nothing."""

from __future__ import annotations

import asyncio
import logging
import time

import fakeredis
import pytest

from toolfleet.orchestrator.fleet import results as results_module
from toolfleet.orchestrator.fleet.results import ResultWaiter
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolResult
from toolfleet.shared.reporting import FEED_COPY_MAX_BYTES, Feed, ResultReporter
from toolfleet.shared.signing import SIGNATURE_FIELD, ResultSigner, new_fleet_key

KEYS = Keys("t")
S_OTHER = session_key("app", "u", "s-other")
S2 = session_key("app", "u", "s2")
S1 = session_key("app", "u", "s1")


def result(call_id: str, session: str = "s1") -> ToolResult:
    now = time.time()
    return ToolResult(
        call_id=call_id, tool="t", session_id=session, invocation_id="i", status=CallStatus.SUCCESS,
        response={"n": call_id}, started_at=now, finished_at=now,
    )  # fmt: skip


async def post(client: fakeredis.FakeAsyncRedis, stream: str, r: ToolResult) -> None:
    await client.xadd(stream, {RESULT_FIELD: r.model_dump_json()})


@pytest.fixture
async def waiter(fake_server: fakeredis.FakeServer, fake_redis: fakeredis.FakeAsyncRedis):  # type: ignore[no-untyped-def]
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    # fakeredis never wakes a blocked XREAD for another client's XADD, so read in short
    # blocks here; the integration tests cover the real blocking read.
    w = ResultWaiter(reader, fake_redis, KEYS, "replica-1", block_ms=20)
    await w.start()
    yield w
    await w.stop()
    await reader.aclose()


async def test_results_on_several_streams_resolve_their_own_futures(
    waiter: ResultWaiter, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    a = await waiter.expect(KEYS.results(S1), ["a1", "a2"])
    b = await waiter.expect(KEYS.results(S2), ["b1"])
    await post(fake_redis, KEYS.results(S2), result("b1", "s2"))
    await post(fake_redis, KEYS.results(S1), result("a2"))
    await post(fake_redis, KEYS.results(S1), result("a1"))
    got = await asyncio.wait_for(asyncio.gather(a["a1"], a["a2"], b["b1"]), timeout=5)
    assert [r.call_id for r in got] == ["a1", "a2", "b1"]


async def test_malformed_entry_is_logged_and_skipped(
    waiter: ResultWaiter, fake_redis: fakeredis.FakeAsyncRedis, caplog: pytest.LogCaptureFixture
) -> None:
    stream = KEYS.results(S1)
    futures = await waiter.expect(stream, ["c1"])
    with caplog.at_level(logging.ERROR):
        await fake_redis.xadd(stream, {RESULT_FIELD: '{"call_id": "c1", "status": "hacked"}'})
        await fake_redis.xadd(stream, {"garbage": "x"})
        await post(fake_redis, stream, result("c1"))
        got = await asyncio.wait_for(futures["c1"], timeout=5)
    assert got.response == {"n": "c1"}
    assert caplog.text.count("rejected a malformed entry") == 2


async def test_late_or_duplicate_result_is_delivered_once(
    waiter: ResultWaiter, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    stream = KEYS.results(S1)
    first = await waiter.expect(stream, ["c1", "c2"])
    await post(fake_redis, stream, result("c1"))
    await post(fake_redis, stream, result("c1"))  # a redelivered task reporting twice
    await post(fake_redis, stream, result("c2"))
    assert (await asyncio.wait_for(first["c2"], 5)).call_id == "c2"
    assert first["c1"].result().call_id == "c1"
    # Waiting again for c1 sees nothing more: its results were consumed and settled.
    await waiter.settle(stream)
    assert await fake_redis.xlen(stream) == 0


async def test_a_result_delivered_but_not_settled_is_delivered_again_when_awaited_again(
    waiter: ResultWaiter, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    # Given a result delivered, whose caller failed before storing it (no settle)
    stream = KEYS.results(S1)
    first = await waiter.expect(stream, ["c1"])
    await post(fake_redis, stream, result("c1"))
    await asyncio.wait_for(first["c1"], 5)

    # When the call is awaited again by a resumed turn in this process, it gets it again
    again = await waiter.expect(stream, ["c1"], reread=True)

    assert (await asyncio.wait_for(again["c1"], 5)).response == {"n": "c1"}


async def test_settle_keeps_results_not_yet_delivered(
    waiter: ResultWaiter, fake_redis: fakeredis.FakeAsyncRedis
) -> None:
    stream = KEYS.results(S1)
    futures = await waiter.expect(stream, ["c1"])
    await post(fake_redis, stream, result("c1"))
    await asyncio.wait_for(futures["c1"], 5)
    await post(fake_redis, stream, result("c9"))  # arrives after, for a call not awaited yet
    await waiter.settle(stream)
    entries = await fake_redis.xrange(stream)
    assert len(entries) == 1 and b'"c9"' in entries[0][1][RESULT_FIELD.encode()]


async def test_with_the_fleet_key_only_results_the_workers_signed_are_accepted(
    fake_server: fakeredis.FakeServer,
    fake_redis: fakeredis.FakeAsyncRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Given a client that may write the results stream but has no fleet key, when it
    posts a well-formed result for the awaited call (unsigned, or signed with another
    key), it is rejected and the call waits for the one a worker signed."""
    signer = ResultSigner(new_fleet_key())
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    signed_waiter = ResultWaiter(reader, fake_redis, KEYS, "replica-2", block_ms=20, signer=signer)
    await signed_waiter.start()
    try:
        stream = KEYS.results(S1)
        futures = await signed_waiter.expect(stream, ["c1"], session_id="s1", tools={"c1": "t"})
        forged = result("c1").model_copy(update={"response": {"n": "forged"}})
        with caplog.at_level(logging.ERROR):
            await post(fake_redis, stream, forged)  # no signature
            payload = forged.model_dump_json().encode()
            other = ResultSigner(new_fleet_key()).sign(payload)
            await fake_redis.xadd(stream, {RESULT_FIELD: payload, SIGNATURE_FIELD: other})
            reporter = ResultReporter(fakeredis.FakeRedis(server=fake_server), 100, signer)
            reporter.post(stream, result("c1"))  # what a worker with the key posts
            got = await asyncio.wait_for(futures["c1"], timeout=5)
        assert got.response == {"n": "c1"}
        assert caplog.text.count("no valid fleet-key signature") == 2
    finally:
        await signed_waiter.stop()
        await reader.aclose()


def feed_reporter(fake_server: fakeredis.FakeServer) -> ResultReporter:
    """What a worker posts with: the result on its stream and a copy on the feed."""
    return ResultReporter(fakeredis.FakeRedis(server=fake_server), 100, feed=Feed.of(KEYS))


async def read_once(waiter: ResultWaiter, server: fakeredis.FakeServer, stream: str) -> None:
    """Wait until the reader has read `stream` itself (what its first read is for): a call
    c0 posted there without a feed copy is answered."""
    futures = await waiter.expect(stream, ["c0"])
    ResultReporter(fakeredis.FakeRedis(server=server), 100).post(stream, result("c0"))
    await asyncio.wait_for(futures["c0"], 5)


async def test_a_result_whose_stream_entry_is_gone_arrives_by_the_feed(
    waiter: ResultWaiter, fake_server: fakeredis.FakeServer
) -> None:
    stream = KEYS.results(S1)
    await read_once(waiter, fake_server, stream)
    futures = await waiter.expect(stream, ["c1"])
    sync = fakeredis.FakeRedis(server=fake_server)
    feed_reporter(fake_server).post(stream, result("c1"))
    sync.delete(stream)  # before the reader could read it there: only the copy is left
    assert (await asyncio.wait_for(futures["c1"], 5)).response == {"n": "c1"}


async def test_results_posted_before_the_watch_and_after_arrive_in_order(
    waiter: ResultWaiter, fake_server: fakeredis.FakeServer
) -> None:
    """A session taken over: one result waits on its stream from before this replica
    watched it; the next comes by the feed, maybe before the stream's first read."""
    stream = KEYS.results(S1)
    ResultReporter(fakeredis.FakeRedis(server=fake_server), 100).post(stream, result("c1"))
    futures = await waiter.expect(stream, ["c1", "c2"])
    feed_reporter(fake_server).post(stream, result("c2"))
    got = await asyncio.wait_for(asyncio.gather(futures["c1"], futures["c2"]), 5)
    assert [r.call_id for r in got] == ["c1", "c2"]


async def test_a_result_read_on_its_stream_and_on_the_feed_is_delivered_once(
    waiter: ResultWaiter, fake_server: fakeredis.FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    stream = KEYS.results(S1)
    with caplog.at_level(logging.INFO):
        futures = await waiter.expect(stream, ["c1", "c2", "c3"])
        feed_reporter(fake_server).post(stream, result("c1"))  # before the stream's first read
        await asyncio.wait_for(futures["c1"], 5)
        feed_reporter(fake_server).post(stream, result("c2"))
        await asyncio.wait_for(futures["c2"], 5)
        # Entries are handled in order: once c3 is in, every copy before it was passed.
        feed_reporter(fake_server).post(stream, result("c3"))
        await asyncio.wait_for(futures["c3"], 5)
    assert "nobody awaits" not in caplog.text
    assert "trimmed" not in caplog.text  # numbered one after another: no stream read again


async def test_feed_entries_for_other_sessions_or_forged_ids_are_passed_over(
    waiter: ResultWaiter, fake_server: fakeredis.FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    stream = KEYS.results(S1)
    await read_once(waiter, fake_server, stream)
    futures = await waiter.expect(stream, ["c1"])
    sync = fakeredis.FakeRedis(server=fake_server)
    with caplog.at_level(logging.INFO):
        feed_reporter(fake_server).post(KEYS.results(S_OTHER), result("x1", "s-other"))
        forged = {
            "stream": stream,
            "entry": "not-an-id",
            "n": sync.incr(KEYS.results_feed_count()),  # numbered as a worker numbers it
            RESULT_FIELD: result("c1").model_dump_json(),
        }
        sync.xadd(KEYS.results_feed(), forged)  # type: ignore[arg-type]
        feed_reporter(fake_server).post(stream, result("c1"))
        got = await asyncio.wait_for(futures["c1"], 5)
    assert got.response == {"n": "c1"}
    assert "x1" not in caplog.text  # another replica's: not even logged here
    assert "naming no entry id ('not-an-id')" in caplog.text


async def test_a_result_too_large_to_copy_is_read_from_its_stream(
    fake_server: fakeredis.FakeServer,
    fake_redis: fakeredis.FakeAsyncRedis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(results_module, "SWEEP_S", 600.0)  # no sweep: the feed's word only
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    waiter = ResultWaiter(reader, fake_redis, KEYS, "replica-3", block_ms=20)
    await waiter.start()
    try:
        stream = KEYS.results(S1)
        await read_once(waiter, fake_server, stream)
        futures = await waiter.expect(stream, ["c1"])
        text = "x" * (FEED_COPY_MAX_BYTES + 1)
        big = result("c1").model_copy(update={"response": {"text": text}})
        feed_reporter(fake_server).post(stream, big)
        assert (await asyncio.wait_for(futures["c1"], 5)).response == big.response
    finally:
        await waiter.stop()
        await reader.aclose()
    sync = fakeredis.FakeRedis(server=fake_server)
    (_, fields), *_ = sync.xrevrange(KEYS.results_feed(), count=1)
    assert RESULT_FIELD.encode() not in fields  # named on the feed, not copied there
    assert fields[b"stream"] == stream.encode()


async def test_results_trimmed_off_the_feed_before_it_was_read_arrive_from_their_stream(
    waiter: ResultWaiter, fake_server: fakeredis.FakeServer
) -> None:
    """The feed keeps its newest entries only: a reader that fell behind finds a gap
    before the copies it reads, and the results in it on their session's stream."""
    stream = KEYS.results(S1)
    await read_once(waiter, fake_server, stream)
    futures = await waiter.expect(stream, ["c1", "c2"])
    sync = fakeredis.FakeRedis(server=fake_server)
    reporter = feed_reporter(fake_server)
    reporter.post(stream, result("c1"))
    ((c1_copy, _),) = sync.xrevrange(KEYS.results_feed(), count=1)
    reporter.post(stream, result("c2"))
    sync.xdel(KEYS.results_feed(), c1_copy)  # trimmed before the reader got to it
    got = await asyncio.wait_for(asyncio.gather(futures["c1"], futures["c2"]), 5)
    assert [r.call_id for r in got] == ["c1", "c2"]


async def test_feed_entries_without_numbers_are_not_trusted_to_follow_on(
    waiter: ResultWaiter, fake_server: fakeredis.FakeServer
) -> None:
    """An entry that carries no number (a worker of an older version posted it) may
    follow a gap: its result, and those before it, are read on their stream."""
    stream = KEYS.results(S1)
    await read_once(waiter, fake_server, stream)
    futures = await waiter.expect(stream, ["c1", "c2"])
    sync = fakeredis.FakeRedis(server=fake_server)
    ResultReporter(sync, 100).post(stream, result("c1"))  # no copy on the feed
    entry = ResultReporter(sync, 100).post(stream, result("c2"))
    copy = {"stream": stream, "entry": entry, RESULT_FIELD: result("c2").model_dump_json()}
    sync.xadd(KEYS.results_feed(), copy)  # type: ignore[arg-type]
    got = await asyncio.wait_for(asyncio.gather(futures["c1"], futures["c2"]), 5)
    assert [r.call_id for r in got] == ["c1", "c2"]


async def test_the_feed_numbered_anew_after_a_restart_is_followed_again(
    waiter: ResultWaiter, fake_server: fakeredis.FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis restarted empty: the numbers start over at 1; the reader reads its streams
    once, then follows the feed from there."""
    stream = KEYS.results(S1)
    await read_once(waiter, fake_server, stream)
    sync = fakeredis.FakeRedis(server=fake_server)
    reporter = feed_reporter(fake_server)
    for call_id in ("c1", "c2"):
        futures = await waiter.expect(stream, [call_id])
        reporter.post(stream, result(call_id))
        await asyncio.wait_for(futures[call_id], 5)
    sync.delete(KEYS.results_feed_count())
    with caplog.at_level(logging.INFO):
        for call_id in ("c3", "c4", "c5"):
            futures = await waiter.expect(stream, [call_id])
            reporter.post(stream, result(call_id))
            assert (await asyncio.wait_for(futures[call_id], 5)).call_id == call_id
    assert caplog.text.count("numbered anew (Redis restarted or failed over)") == 1
    assert "trimmed" not in caplog.text


async def test_a_feed_counter_that_is_not_a_number_is_numbered_anew(
    fake_server: fakeredis.FakeServer,
    fake_redis: fakeredis.FakeAsyncRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A counter overwritten with something else neither stops a replica from starting
    nor a worker from posting: the post numbers it anew, and the reader, not knowing
    where the feed stood, reads the streams once."""
    sync = fakeredis.FakeRedis(server=fake_server)
    sync.set(KEYS.results_feed_count(), "garbage")
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    waiter = ResultWaiter(reader, fake_redis, KEYS, "replica-4", block_ms=20)
    await waiter.start()
    try:
        stream = KEYS.results(S1)
        reporter = feed_reporter(fake_server)
        with caplog.at_level(logging.INFO):
            for call_id in ("c1", "c2"):
                futures = await waiter.expect(stream, [call_id])
                reporter.post(stream, result(call_id))
                assert (await asyncio.wait_for(futures[call_id], 5)).call_id == call_id
    finally:
        await waiter.stop()
        await reader.aclose()
    assert sync.get(KEYS.results_feed_count()) == b"2"
    assert "trimmed" not in caplog.text


@pytest.fixture
async def signed_waiter(  # type: ignore[no-untyped-def]
    fake_server: fakeredis.FakeServer, fake_redis: fakeredis.FakeAsyncRedis
):
    """A waiter with the fleet key, and the signer its workers post with."""
    signer = ResultSigner(new_fleet_key())
    reader = fakeredis.FakeAsyncRedis(server=fake_server)
    w = ResultWaiter(reader, fake_redis, KEYS, "replica-5", block_ms=20, signer=signer)
    await w.start()
    yield w, signer
    await w.stop()
    await reader.aclose()


async def test_entries_whose_fields_are_no_text_are_passed_over_and_reading_goes_on(
    signed_waiter: tuple[ResultWaiter, ResultSigner],
    fake_server: fakeredis.FakeServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Given a Redis client without the fleet key, when it writes entries whose signature
    is bytes that are not UTF-8 or text that is not ASCII, or a feed entry naming a
    stream in bytes that are not UTF-8, then each is rejected (the call still waits) and
    the reader goes on: every session's next result arrives."""
    waiter, signer = signed_waiter
    stream, other = KEYS.results(S1), KEYS.results(S2)
    await read_once_signed(waiter, signer, fake_server, stream)
    sync = fakeredis.FakeRedis(server=fake_server)
    with caplog.at_level(logging.ERROR):
        # On a stream not read yet: its first read returns them, then the real result.
        payload = result("c2", "s2").model_dump_json()
        for signature in (b"\xff\xfe", "\u00e9".encode()):
            sync.xadd(other, {RESULT_FIELD: payload, SIGNATURE_FIELD: signature})
        ResultReporter(sync, 100, signer).post(other, result("c2", "s2"))
        others = await waiter.expect(other, ["c2"], session_id="s2", tools={"c2": "t"})
        assert (await asyncio.wait_for(others["c2"], 5)).call_id == "c2"
        futures = await waiter.expect(stream, ["c1"], session_id="s1", tools={"c1": "t"})
        junk = {"stream": b"\xff", "entry": "1-0", "n": sync.incr(KEYS.results_feed_count())}
        sync.xadd(KEYS.results_feed(), {**junk, RESULT_FIELD: payload})
        ResultReporter(sync, 100, signer, feed=Feed.of(KEYS)).post(stream, result("c1"))
        assert (await asyncio.wait_for(futures["c1"], 5)).call_id == "c1"
    assert caplog.text.count("no valid fleet-key signature") == 2
    assert "could not be read" not in caplog.text  # refused as what they are, not by luck


async def test_a_feed_entry_naming_an_entry_far_ahead_does_not_hold_back_its_stream(
    signed_waiter: tuple[ResultWaiter, ResultSigner],
    fake_server: fakeredis.FakeServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A feed entry names the stream entry it copies, unsigned. Given one written by a
    client without the fleet key, naming an entry far ahead - with junk, or with a copy
    of a result a worker signed - when the session's real results come, then they arrive:
    the reader never reads on past an entry because a feed entry named it."""
    waiter, signer = signed_waiter
    stream = KEYS.results(S1)
    await read_once_signed(waiter, signer, fake_server, stream)
    futures = await waiter.expect(
        stream, ["c1", "c2"], session_id="s1", tools={"c1": "t", "c2": "t"}
    )
    sync = fakeredis.FakeRedis(server=fake_server)
    replayed = result("c1").model_dump_json().encode()
    far = {"stream": stream, "entry": "99999999999999-0"}
    with caplog.at_level(logging.ERROR):
        for fields in (
            {RESULT_FIELD: b"junk"},
            {RESULT_FIELD: replayed, SIGNATURE_FIELD: signer.sign(replayed)},
        ):
            number = sync.incr(KEYS.results_feed_count())
            sync.xadd(KEYS.results_feed(), {**far, "n": number, **fields})  # type: ignore[dict-item]
        reporter = ResultReporter(sync, 100, signer, feed=Feed.of(KEYS))
        reporter.post(stream, result("c1"))
        reporter.post(stream, result("c2"))
        got = await asyncio.wait_for(asyncio.gather(futures["c1"], futures["c2"]), 5)
    assert [r.call_id for r in got] == ["c1", "c2"]
    assert caplog.text.count("later than itself") == 2


async def read_once_signed(
    waiter: ResultWaiter, signer: ResultSigner, server: fakeredis.FakeServer, stream: str
) -> None:
    """`read_once` for a waiter with the fleet key."""
    futures = await waiter.expect(stream, ["c0"], session_id="s1", tools={"c0": "t"})
    ResultReporter(fakeredis.FakeRedis(server=server), 100, signer).post(stream, result("c0"))
    await asyncio.wait_for(futures["c0"], 5)
