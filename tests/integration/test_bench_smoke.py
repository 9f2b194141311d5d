"""The benchmark suite at tiny sizes, so that it never rots (`python -m bench.run --smoke`)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import rabbit, run
from bench.brokers import brokers
from bench.context import SMOKE, Context
from bench.harness import bench_settings
from tests.faults.rabbit import require_rabbit
from toolfleet.orchestrator.cli.embedded import free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TABLES = ["per_call", "fanout", "throughput", "scale", "resume", "adk", "io", "io_defaults", "mcp"]
# Each smoked by a test of its own: RabbitMQ, a Sentinel topology and two replicas.
OWN_TESTS = ["brokers", "replication", "cost"]


def numbers(row: list[object]) -> list[float]:
    return [v for v in row if isinstance(v, int | float) and not isinstance(v, bool)]


def smoke_run(tmp_path: Path, figures: list[str], timeout_s: float) -> tuple[dict[str, Any], str]:
    """`bench.run --smoke --only figures` with no TOOLFLEET_* setting: its JSON and stdout."""
    out = tmp_path / "smoke.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLFLEET_")}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench.run", "--smoke", "--only", *figures, "--json", str(out)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:  # slow, or stuck: what it printed says where
        pytest.fail(f"the smoke run took over {timeout_s} s; it printed:\n{_text(exc)}")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["errors"] == {} and list(result["tables"]) == figures
    return result, done.stdout


def _text(timed_out: subprocess.TimeoutExpired) -> str:
    """The last of what a timed-out run wrote to stdout and stderr."""
    parts = (timed_out.stdout, timed_out.stderr)
    texts = [p.decode(errors="replace") if isinstance(p, bytes) else p or "" for p in parts]
    return "\n".join(t[-4000:] for t in texts)


def test_every_figure_of_the_suite_has_a_smoke_run() -> None:
    assert sorted(TABLES + OWN_TESTS) == sorted(run.NAMES)


@pytest.mark.timeout(360)  # nine figures' worker starts on a shared 2-core machine
def test_smoke_run_writes_every_table_with_numbers(tmp_path: Path) -> None:
    result, stdout = smoke_run(tmp_path, TABLES, timeout_s=300)
    for key, table in result["tables"].items():
        assert table["rows"], key
        for row in table["rows"]:
            if key == "adk" and table["skipped"] and str(row[0]).startswith("ADK"):
                continue  # google-adk not installed here: those rows say so, with no numbers
            assert numbers(row), (key, row)
        assert f"### {table['title']}" in stdout  # the markdown table was printed

    per_call = result["tables"]["per_call"]["data"]["stats_ms"]
    assert all(per_call[path]["p50"] > 0 for path in ("raw", "fleet", "turn"))
    scale = result["tables"]["scale"]["data"]
    assert scale["lost"] == 0 and scale["duplicated"] == 0
    assert scale["stuck_sessions"] == 0
    sizes = result["sizes"]
    assert scale["answered_turns"] == sizes["scale_sessions"] * sizes["scale_turns"]
    fanout = result["tables"]["fanout"]
    assert len(fanout["rows"]) == len(sizes["fanout_ks"]) * len(sizes["fanout_slots"])
    adk = result["tables"]["adk"]
    assert adk["data"]["toolfleet_s"] and all(t > 0 for t in adk["data"]["toolfleet_s"])
    io = result["tables"]["io"]
    assert len(io["rows"]) == len(sizes["io_ks"]) + 2  # the async ks, the sync tool, 2 processes
    assert all(row[4] > 0 for row in io["rows"])  # the io worker's RSS was measured
    defaults = result["tables"]["io_defaults"]
    assert [row[0] for row in defaults["rows"]] == list(sizes["wide_ks"])
    assert all(row[2] > 0 and row[4] is True for row in defaults["rows"])  # every call answered
    assert defaults["data"]["changed"] == []  # the embedded default, no setting changed
    for row in defaults["rows"]:  # the CPU the turn took, and the turn it allows
        assert len(row[5].split(" / ")) == 3 and row[6] >= sizes["io_ms"]
    widest = defaults["data"]["cpu_us_per_call"][str(max(sizes["wide_ks"]))]
    assert sum(widest.values()) > 0  # (in clock ticks: a narrow turn may read 0)
    mcp = result["tables"]["mcp"]["data"]
    assert mcp["worker_server_starts"] == 1  # one session for all the worker's calls
    assert mcp["direct"]["p50"] > 0 and mcp["fleet"]["p50"] > 0


@pytest.mark.timeout(120)  # two replicas and a worker start, then a few hundred calls
def test_smoke_run_of_the_cost_figure_measures_both_sizes(tmp_path: Path) -> None:
    result, stdout = smoke_run(tmp_path, ["cost"], timeout_s=100)
    table, sizes = result["tables"]["cost"], result["sizes"]
    sessions, tickets = sizes["cost_sessions"], sizes["cost_tickets"]
    # Four memory measures per session size, two per ticket size, one apply per ticket
    # size, and an HTTP turn with none pending and at each ticket size.
    assert len(table["rows"]) == 4 * len(sessions) + 3 * len(tickets) + len(tickets) + 1
    assert [row[1] for row in table["rows"][: len(sessions)]] == [
        f"{n:,} sessions" for n in sessions
    ]
    for row in table["rows"]:
        assert len(row) == len(table["columns"]) == 6, row
        assert len(numbers([row[2], row[4], row[5]])) == 3, row  # value, reference, ratio
        assert row[4] > 0, row
        if not str(row[0]).startswith("replica"):  # RSS may reuse memory freed before
            assert row[2] > 0, row
    data = table["data"]
    assert [p["size"] for p in data["sessions"]] == sessions
    turns = sizes["cost_turns"]
    assert [p["extra"]["events"] for p in data["sessions"]] == [n * turns * 4 for n in sessions]
    assert [p["extra"]["records"] for p in data["tickets"]] == tickets  # all pending at once
    assert [a["completions"] for a in data["completions"]] == [sizes["cost_completions"]] * 2
    assert f"### {table['title']}" in stdout

    matplotlib = pytest.importorskip("matplotlib")  # the plot needs the bench extra
    assert matplotlib is not None
    from bench.cost_plot import plot

    png = tmp_path / "cost.png"
    plot(result, png)
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


# Six worker processes on two brokers, each started and stopped, and a vhost made and
# deleted by rabbitmqctl: 20 s alone, over 75 s beside the suite's other processes.
@pytest.mark.timeout(240)
def test_smoke_run_of_the_brokers_figure_measures_both_brokers(tmp_path: Path) -> None:
    require_rabbit()
    result, stdout = smoke_run(tmp_path, ["brokers"], timeout_s=200)
    table, sizes = result["tables"]["brokers"], result["sizes"]
    measures = 1 + len(sizes["brokers_io_ks"])  # calls/s, then a turn per k
    assert [row[0] for row in table["rows"]] == ["Redis"] * measures + ["RabbitMQ"] * measures
    for row in table["rows"]:
        assert len(row) == len(table["columns"]) == 6, row
        assert len(numbers(row[2:])) == 4 and all(v > 0 for v in numbers(row[2:])), row
    data = table["data"]
    for broker in ("Redis", "RabbitMQ"):
        assert data["raw_calls_per_s"][broker] and data["fleet_calls_per_s"][broker]
        for k in sizes["brokers_io_ks"]:  # no turn ends before its calls' sleep
            assert min(data["io_turn_s"][broker][str(k)]) >= sizes["io_ms"] / 1000
    assert f"### {table['title']}" in stdout


def test_the_brokers_figure_says_why_where_rabbitmq_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rabbit, "PORT", free_port())  # nothing listens there
    with asyncio.Runner() as aio:
        ctx = Context("redis://127.0.0.1:1", bench_settings("redis://127.0.0.1:1"), SMOKE, aio)
        with pytest.raises(
            rabbit.RabbitMissing, match=r"RabbitMQ is not listening on 127\.0\.0\.1"
        ):
            brokers(ctx)


@pytest.mark.timeout(180)  # a master, a replica, three sentinels and two workers
def test_smoke_run_of_the_replication_figure_measures_each_write(tmp_path: Path) -> None:
    result, stdout = smoke_run(tmp_path, ["replication"], timeout_s=150)
    table, sizes = result["tables"]["replication"], result["sizes"]
    turns, writes = sizes["replication_turns"], sizes["replication_writes"]
    assert [row[1] for row in table["rows"]] == [turns, writes, writes, writes]
    for row in table["rows"]:
        assert len(row) == len(table["columns"]) == 8, row
        assert all(v > 0 for v in numbers(row[2:])) and len(numbers(row[2:])) == 6, row
    runs = table["data"]["runs_s"]
    assert sorted(runs) == ["completion", "result", "session", "turn"]
    for by_wait in runs.values():
        assert sorted(by_wait) == ["0", "1"]
        assert all(len(r) == sizes["replication_rounds"] for r in by_wait.values())
    assert f"### {table['title']}" in stdout
