"""The benchmark suite at tiny sizes, so that it never rots (`python -m bench.run --smoke`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TABLES = ["per_call", "fanout", "throughput", "scale", "resume", "adk", "io", "io_defaults", "mcp"]


def numbers(row: list[object]) -> list[float]:
    return [v for v in row if isinstance(v, int | float) and not isinstance(v, bool)]


@pytest.mark.timeout(200)  # nine figures' worker starts on a shared 2-core machine
def test_smoke_run_writes_every_table_with_numbers(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLFLEET_")}
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--smoke", "--json", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["errors"] == {}
    assert sorted(result["tables"]) == sorted(TABLES)
    for key, table in result["tables"].items():
        assert table["rows"], key
        for row in table["rows"]:
            if key == "adk" and table["skipped"] and str(row[0]).startswith("ADK"):
                continue  # google-adk not installed here: those rows say so, with no numbers
            assert numbers(row), (key, row)
        assert f"### {table['title']}" in done.stdout  # the markdown table was printed

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
    mcp = result["tables"]["mcp"]["data"]
    assert mcp["worker_server_starts"] == 1  # one session for all the worker's calls
    assert mcp["direct"]["p50"] > 0 and mcp["fleet"]["p50"] > 0


@pytest.mark.timeout(120)  # two replicas and a worker start, then a few hundred calls
def test_smoke_run_of_the_cost_figure_measures_both_sizes(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLFLEET_")}
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--smoke", "--only", "cost", "--json", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["errors"] == {} and list(result["tables"]) == ["cost"]
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
    assert f"### {table['title']}" in done.stdout

    matplotlib = pytest.importorskip("matplotlib")  # the plot needs the bench extra
    assert matplotlib is not None
    from bench.cost_plot import plot

    png = tmp_path / "cost.png"
    plot(result, png)
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
