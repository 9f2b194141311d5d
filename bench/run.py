"""Run toolfleet's benchmarks: `python -m bench.run [--smoke] [--only NAME ...]`.

Starts a private Redis unless --redis-url is given (use a database of its own), starts
the worker processes each benchmark needs, prints one markdown table per figure with
its reference and ratio, and writes everything measured as JSON. See bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis

from bench.context import FULL, SMOKE, Context
from bench.harness import bench_settings, machine_info
from bench.report import Table, machine_markdown
from toolfleet.orchestrator.cli.embedded import EmbeddedRedis
from toolfleet.orchestrator.event_loop import loop_factory
from toolfleet.shared.gc_policy import orchestrator_policy

OUT_DIR = Path(__file__).resolve().parent / "out"


# Run in this order: 1, 5 and 3 share worker processes (3 adds the second one).
FIGURES = {
    "per_call": "bench.overhead:per_call",
    "resume": "bench.resume:resume",
    "throughput": "bench.overhead:throughput",
    "fanout": "bench.fanout:fanout",
    "adk": "bench.adk:adk",
    "scale": "bench.scale:scale",
    "io": "bench.io_pools:io_pools",
    "io_defaults": "bench.io_defaults:io_defaults",
    "mcp": "bench.mcp:mcp",
    "cost": "bench.cost:cost",
}
NAMES = list(FIGURES)
# Run only when named in --only: the full sizes take tens of minutes.
OPT_IN = {"cost"}
ORDER = {
    "per_call": 1,
    "fanout": 2,
    "throughput": 3,
    "scale": 4,
    "resume": 5,
    "adk": 6,
    "io": 7,
    "io_defaults": 7.5,
    "mcp": 8,
    "cost": 9,
}


def _figure(name: str) -> Callable[[Context], Table]:
    module, function = FIGURES[name].split(":")
    found: Callable[[Context], Table] = getattr(importlib.import_module(module), function)
    return found


@contextlib.contextmanager
def redis_server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    with EmbeddedRedis() as server:
        yield server.url


def cleanup(url: str, prefix: str) -> None:
    """Remove what the run left in Redis (matters with --redis-url)."""
    client = redis.Redis.from_url(url)
    try:
        for pattern in (
            f"{prefix}:*",
            "tools.bench",
            "tools.io",
            "tools.mcpbench",
            "bench.raw",
            "bench:raw-worker:*",
        ):
            for key in client.scan_iter(pattern, count=1000):
                client.delete(key)
    finally:
        client.close()


def render(result: dict[str, Any]) -> str:
    """The markdown of a run, from its JSON."""
    tables = [Table(**t) for t in result["tables"].values()]
    tables.sort(key=lambda t: ORDER[t.key])
    body = [
        machine_markdown(result["machine"], result["sizes"]),
        *(t.to_markdown() for t in tables),
    ]
    return "\n\n".join(body) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--redis-url", help="use this Redis (a database of its own)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check it runs")
    parser.add_argument("--only", nargs="+", choices=NAMES, metavar="NAME", help=str(NAMES))
    parser.add_argument("--json", type=Path, help="where to write the JSON results")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument(
        "--render", type=Path, metavar="JSON", help="only print the tables of a JSON written before"
    )
    parser.add_argument(
        "--adk-python",
        help="an interpreter with google-adk for figure 6 (default: this one if it has "
        "google-adk, else $TOOLFLEET_BENCH_ADK_PYTHON, else bench/out/adk-venv/bin/python)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.render:
        print(render(json.loads(args.render.read_text())))
        return 0

    sizes = SMOKE if args.smoke else FULL
    selected = [n for n in NAMES if n in (args.only or set(NAMES) - OPT_IN)]
    json_path = args.json or OUT_DIR / ("smoke.json" if args.smoke else "results.json")
    started = time.perf_counter()
    tables: list[Table] = []
    errors: dict[str, str] = {}
    with redis_server(args.redis_url) as url:
        settings = bench_settings(url)
        info = machine_info(url)
        print(f"# toolfleet benchmarks{' (smoke sizes)' if args.smoke else ''}\n")
        print(machine_markdown(info, sizes.as_dict()) + "\n", flush=True)
        orchestrator_policy()  # as `toolfleet serve` and `run` do
        # The orchestrator's loop, as `toolfleet serve` and `run` have it (uvloop).
        with asyncio.Runner(loop_factory=loop_factory(settings)) as aio:
            ctx = Context(url, settings, sizes, aio, smoke=args.smoke, adk_python=args.adk_python)
            try:
                for name in selected:
                    figure_started = time.perf_counter()
                    try:
                        table = _figure(name)(ctx)
                    except Exception:
                        errors[name] = traceback.format_exc()
                        print(f"### {name} FAILED\n\n```\n{errors[name]}```\n", flush=True)
                        continue
                    table.data["seconds"] = time.perf_counter() - figure_started
                    tables.append(table)
                    print(table.to_markdown(), flush=True)
            finally:
                ctx.stop_baseline()
        cleanup(url, settings.key_prefix)
    tables.sort(key=lambda t: ORDER[t.key])
    elapsed = time.perf_counter() - started
    result: dict[str, Any] = {
        "machine": info,
        "smoke": args.smoke,
        "sizes": sizes.as_dict(),
        "seconds": elapsed,
        "tables": {t.key: t.to_json() for t in tables},
        "errors": errors,
    }
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=2, default=str))
    if args.markdown:
        args.markdown.write_text(render(result))
    print(f"wrote {json_path} ({elapsed:.0f} s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
