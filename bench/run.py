"""Run toolfleet's benchmarks: `python -m bench.run [--smoke] [--only NAME ...]`.

Starts a private Redis unless --redis-url is given (use a database of its own), starts
the worker processes each benchmark needs, prints one markdown table per figure with
its reference and ratio, and writes everything measured as JSON. At full sizes each
figure measured is also saved as bench/figures/NAME.json and bench/RESULTS.md is
rewritten from those files (`--results-only` rewrites it without measuring).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis

from bench import results_page
from bench.catalog import BY_KEY
from bench.context import FULL, SMOKE, Context
from bench.harness import bench_settings, machine_info
from bench.report import Table, machine_markdown
from toolfleet.orchestrator.cli.embedded import EmbeddedRedis
from toolfleet.shared.event_loop import loop_factory
from toolfleet.shared.gc_policy import orchestrator_policy

OUT_DIR = Path(__file__).resolve().parent / "out"


# Run in this order: 1, 5 and 3 share worker processes (3 adds the second one; 7 and 3b
# stop them: 3b starts its own on both brokers).
FIGURES = {
    "per_call": "bench.overhead:per_call",
    "resume": "bench.resume:resume",
    "throughput": "bench.overhead:throughput",
    "fanout": "bench.fanout:fanout",
    "adk": "bench.adk:adk",
    "scale": "bench.scale:scale",
    "io": "bench.io_pools:io_pools",
    "brokers": "bench.brokers:brokers",
    "replication": "bench.replication_wait:replication",
    "io_defaults": "bench.io_defaults:io_defaults",
    "mcp": "bench.mcp:mcp",
    "cost": "bench.cost:cost",
}
NAMES = list(FIGURES)
# Run only when named in --only: the full sizes take tens of minutes.
OPT_IN = {"cost"}


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
    tables.sort(key=lambda t: BY_KEY[t.key].rank)
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
        "--results-only",
        action="store_true",
        help="only rewrite bench/RESULTS.md from the saved bench/figures/*.json",
    )
    parser.add_argument(
        "--no-save",
        action="store_true",
        help="leave bench/figures/ and bench/RESULTS.md as they are (smoke runs always do)",
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
    if args.results_only:
        print(f"wrote {results_page.write()}")
        return 0

    sizes = SMOKE if args.smoke else FULL
    selected = [n for n in NAMES if n in (args.only or set(NAMES) - OPT_IN)]
    json_path = args.json or OUT_DIR / ("smoke.json" if args.smoke else "results.json")
    started = time.perf_counter()
    tables: list[Table] = []
    errors: dict[str, str] = {}
    moments: dict[str, dict[str, str]] = {}  # each figure's own start: date, load average
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
                    moments[name] = _moment()
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
    tables.sort(key=lambda t: BY_KEY[t.key].rank)
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
    if not (args.smoke or args.no_save):
        save_figures(tables, info, moments, result["sizes"])
    return 1 if errors else 0


def save_figures(
    tables: list[Table],
    machine: dict[str, Any],
    moments: dict[str, dict[str, str]],
    sizes: dict[str, Any],
    figures_dir: Path = results_page.FIGURES_DIR,
    page: Path = results_page.PAGE,
) -> list[Path]:
    """Save each measured figure as its own JSON (with its image, if it has one) and
    rewrite the results page from every figure's saved JSON.

    Args:
        tables: the figures measured.
        machine: the run's machine info.
        moments: each figure's date and load average at its start, by key.
        sizes: the run's sizes.
        figures_dir: the folder of saved results.
        page: the results page to rewrite.

    Returns:
        The JSON files written, then the page.
    """
    written: list[Path] = []
    for table in tables:
        result = results_page.figure_result(table, {**machine, **moments.get(table.key, {})}, sizes)
        written.append(results_page.save(result, table.key, figures_dir))
        print(f"saved {written[-1]}")
        _draw(table.key, result, figures_dir)
    written.append(results_page.write(figures_dir, page))
    print(f"wrote {written[-1]}")
    return written


def _moment() -> dict[str, str]:
    """The date and load average now, as `machine_info` writes them."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "loadavg_at_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def _draw(key: str, result: dict[str, Any], figures_dir: Path) -> None:
    """Draw a figure's image beside its saved JSON, if it has one; without matplotlib
    say that the image saved before no longer matches."""
    entry = BY_KEY[key].plot
    if not entry:
        return
    png = results_page.saved_path(key, figures_dir).with_suffix(".png")
    try:
        module, function = entry.split(":")
        draw: Callable[[dict[str, Any], Path], None] = getattr(
            importlib.import_module(module), function
        )
        draw(result, png)
    except ImportError as exc:
        print(f"{png} not drawn ({exc}): it no longer matches its JSON", file=sys.stderr)
        return
    print(f"drew {png}")


if __name__ == "__main__":
    sys.exit(main())
