"""The ADK side of figures 6 and 7b: turns run in-process by google-adk's Runner.

Runs in an interpreter that has google-adk (it pins google-genai<3, so it usually lives
in its own virtualenv, see bench/RESULTS.md); no toolfleet import. Prints one JSON
object. Figure 6 (`--cpu-iterations`): the same 4-call turn, the wall time of each
repetition, with ADK's default tool execution (every tool on the event loop) and with
`RunConfig(tool_thread_pool_config=...)` (sync tools on a thread pool). Figure 7b
(`--wide K ...`): one turn of K calls of the async tool, for each K, with ADK's default
execution. The model is scripted: the function calls, then text; no network.

    python -m bench.adk_turn --cpu-iterations N [--repeat 3 --sync-ms 1000 --async-ms 500]
    python -m bench.adk_turn --wide 1000 10000 [--repeat 3 --async-ms 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import AsyncGenerator
from typing import Any

from bench import workload


def sync_io_a(ms: int) -> dict[str, int]:
    """A blocking call (a slow API).

    Args:
        ms: How long it blocks, in milliseconds.
    """
    return workload.sleep_ms(ms)


def sync_io_b(ms: int) -> dict[str, int]:
    """Another blocking call (a database query).

    Args:
        ms: How long it blocks, in milliseconds.
    """
    return workload.sleep_ms(ms)


async def async_io(ms: int) -> dict[str, int]:
    """A non-blocking call (async HTTP).

    Args:
        ms: How long it waits, in milliseconds.
    """
    return await workload.async_sleep_ms(ms)


def cpu_bound(iterations: int) -> dict[str, int]:
    """Pure-Python computation that holds the GIL.

    Args:
        iterations: Rounds of work.
    """
    return workload.cpu_work(iterations)


def turn_calls(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("sync_io_a", {"ms": args.sync_ms}),
        ("sync_io_b", {"ms": args.sync_ms}),
        ("async_io", {"ms": args.async_ms}),
        ("cpu_bound", {"iterations": args.cpu_iterations}),
    ]


def wide_calls(k: int, ms: int) -> list[tuple[str, dict[str, Any]]]:
    """One turn of `k` calls of the async tool, each waiting `ms` milliseconds."""
    return [("async_io", {"ms": ms}) for _ in range(k)]


async def run_adk(
    args: argparse.Namespace,
    thread_pool: bool,
    calls: list[tuple[str, dict[str, Any]]],
    warmup: list[tuple[str, dict[str, Any]]] | None = None,
) -> list[float]:
    """`args.repeat` turns of `calls` after a warm-up turn of `warmup` (default: the same
    calls); the wall time of each."""
    from google.adk.agents import LlmAgent
    from google.adk.agents.run_config import RunConfig, ToolThreadPoolConfig
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    class ScriptedLlm(BaseLlm):  # type: ignore[misc,unused-ignore]
        """The turn's function calls, then text once the responses are in. No network."""

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            turn = calls if measuring or warmup is None else warmup
            last = llm_request.contents[-1] if llm_request.contents else None
            answered = last is not None and any(p.function_response for p in last.parts or ())
            if answered:
                parts = [types.Part(text="all done")]
            else:
                parts = [
                    types.Part(function_call=types.FunctionCall(name=n, args=a, id=f"c{i}"))
                    for i, (n, a) in enumerate(turn)
                ]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    agent = LlmAgent(
        name="bench_agent",
        model=ScriptedLlm(model="scripted"),
        instruction="Call the four tools.",
        tools=[sync_io_a, sync_io_b, async_io, cpu_bound],
    )
    runner = InMemoryRunner(agent=agent, app_name="bench")
    config = RunConfig(
        tool_thread_pool_config=ToolThreadPoolConfig(max_workers=4) if thread_pool else None
    )
    walls: list[float] = []
    measuring = False
    for i in range(args.repeat + 1):  # the first is a warm-up
        measuring = i > 0
        expected = len(calls if measuring or warmup is None else warmup)
        session = await runner.session_service.create_session(app_name="bench", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text=f"go {i}")])
        started = time.perf_counter()
        responses = 0
        text = ""
        async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=message, run_config=config
        ):
            for part in (event.content.parts or []) if event.content else []:
                responses += part.function_response is not None
                text += part.text or ""
        if i > 0:
            walls.append(time.perf_counter() - started)
        if responses != expected or not text:
            raise RuntimeError(f"ADK turn incomplete: {responses} responses, text {text!r}")
    await runner.close()
    return walls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cpu-iterations", type=int)
    parser.add_argument("--wide", type=int, nargs="+", metavar="K", help="turns of K async calls")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sync-ms", type=int, default=1000)
    parser.add_argument("--async-ms", type=int, default=500)
    args = parser.parse_args(argv)
    try:
        import google.adk
    except ImportError as exc:
        print(json.dumps({"error": f"google-adk cannot be imported: {exc}"}))
        return 0
    out: dict[str, Any] = {"adk_version": google.adk.__version__}
    if args.wide:
        out["wide"] = {
            str(k): asyncio.run(
                run_adk(args, False, wide_calls(k, args.async_ms), wide_calls(10, args.async_ms))
            )
            for k in args.wide
        }
        print(json.dumps(out))
        return 0
    if args.cpu_iterations is None:
        parser.error("--cpu-iterations is required without --wide")
    calls = turn_calls(args)
    out["default"] = asyncio.run(run_adk(args, False, calls))
    out["thread_pool"] = asyncio.run(run_adk(args, True, calls))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
