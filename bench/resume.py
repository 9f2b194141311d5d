"""Figure 5: a long-running call's completion posted -> the model called again."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import redis
import redis.asyncio as aioredis

from bench import tools as bench_tools
from bench.context import Context
from bench.harness import BenchModel, summary_ms
from bench.report import Table, ratio
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.invocation import CallFinished
from toolfleet.orchestrator.models.offline import Call, ScriptView, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.completions import Completions
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import CallStatus

AGENT = "bench_tickets"


class Clock:
    """When the model was asked for the turn after each completion, by user message."""

    def __init__(self) -> None:
        self.called: dict[str, float] = {}
        self.events: dict[str, asyncio.Event] = {}

    def expect(self, message: str) -> asyncio.Event:
        self.events[message] = asyncio.Event()
        return self.events[message]

    def resumed(self, view: ScriptView) -> str:
        self.called[view.user_text] = time.perf_counter()
        event = self.events.get(view.user_text)
        if event is not None:
            event.set()
        return "the ticket is resolved"


def post_timed(completions: Completions, call_id: str) -> float:
    """Post the final result (in a thread, like another process would); when it started."""
    started = time.perf_counter()
    completions.post_result(call_id, {"status": "resolved"}, source="bench")
    return started


async def stream_hop(reader: aioredis.Redis, writer: redis.Redis, stream: str, group: str) -> float:
    """Reference: XADD by a poster -> a consumer blocked in XREADGROUP has it (seconds)."""

    async def wait_for_entry() -> Any:
        streams: Any = {stream: ">"}
        return await reader.xreadgroup(group, "c", streams, count=1, block=5000)

    read = asyncio.create_task(wait_for_entry())
    await asyncio.sleep(0.002)  # let the read block first, as the listener's does

    def post() -> float:
        started = time.perf_counter()
        writer.xadd(stream, {"c": "1"}, maxlen=100, approximate=True)
        return started

    started = await asyncio.to_thread(post)
    response: Any = await read
    elapsed = time.perf_counter() - started
    if not response:
        raise RuntimeError("stream hop: nothing read")
    return elapsed


async def measure(ctx: Context, n: int) -> tuple[list[float], list[float], list[float]]:
    clock = Clock()
    model = BenchModel(
        [call(Call("open_ticket", {"name": "bench"})), say("ticket opened"), say(clock.resumed)]
    )
    agent = Agent(name=AGENT, tools=[bench_tools.open_ticket_tool])
    keys = Keys(ctx.settings.key_prefix)
    sync_client = redis.Redis.from_url(ctx.redis_url)
    completions = Completions(sync_client, keys)
    hop_reader = aioredis.Redis.from_url(ctx.redis_url)
    hop_stream, hop_group = f"{keys.prefix}:bench-hop", "bench"
    with contextlib.suppress(aioredis.ResponseError):
        await hop_reader.xgroup_create(hop_stream, hop_group, id="$", mkstream=True)
    to_model: list[float] = []
    to_answer: list[float] = []
    hops: list[float] = []
    try:
        async with Orchestrator([agent], ctx.settings, models={AGENT: model}) as orch:
            runner = orch.runner(AGENT)
            for i in range(n + 2):  # the first two are warm-up
                message = f"ticket {i} {uuid.uuid4().hex[:6]}"
                session_id = f"resume-{uuid.uuid4().hex}"
                call_id = ""
                async for update in runner.run(user_id="u", session_id=session_id, message=message):
                    if (
                        isinstance(update, CallFinished)
                        and update.result.status is CallStatus.PENDING
                    ):
                        call_id = update.result.call_id
                if not call_id:
                    raise RuntimeError("the long-running call did not answer pending")
                resumed = clock.expect(message)
                posted = await asyncio.to_thread(post_timed, completions, call_id)
                await asyncio.wait_for(resumed.wait(), 30)
                model_at = clock.called[message]
                if not await orch.wait_until_settled(session_key(AGENT, "u", session_id), 30):
                    raise RuntimeError(f"session {session_id} did not settle")
                answered = time.perf_counter()
                hop = await stream_hop(hop_reader, sync_client, hop_stream, hop_group)
                if i >= 2:
                    to_model.append(model_at - posted)
                    to_answer.append(answered - posted)
                    hops.append(hop)
    finally:
        await hop_reader.aclose()
        sync_client.close()
    return to_model, to_answer, hops


def resume(ctx: Context) -> Table:
    ctx.baseline(1)
    to_model, to_answer, hops = ctx.aio.run(measure(ctx, ctx.sizes.resume_n))
    stats = {
        "hop": summary_ms(hops),
        "to_model": summary_ms(to_model),
        "to_answer": summary_ms(to_answer),
    }
    hop = stats["hop"]
    table = Table(
        key="resume",
        title="5. Resume latency: long-running completion posted → model called again",
        columns=["path", "n", "p50 ms", "p95 ms", "p99 ms", "p50 ÷ hop", "p99 ÷ hop"],
        data={"stats_ms": stats},
    )
    labels = {
        "hop": "Redis stream hop: XADD → blocked XREADGROUP (reference floor)",
        "to_model": "**posted → model called again** (toolfleet)",
        "to_answer": "posted → answer stored, session settled (toolfleet)",
    }
    for key, label in labels.items():
        s = stats[key]
        table.rows.append(
            [label, int(s["n"]), s["p50"], s["p95"], s["p99"],
             ratio(s["p50"], hop["p50"]), ratio(s["p99"], hop["p99"])]
        )  # fmt: skip
    table.notes = [
        "The completion is posted from a thread with the synchronous `Completions.post_result` "
        "(HGET pending + XADD), timed from before the post; the orchestrator's completions "
        "listener claims it (SET NX), takes the session's lease, stores the response, "
        "acknowledges and runs the model.",
        "No goal was set for this figure; the hop is the least any Redis-stream delivery "
        "can take here.",
    ]
    return table
