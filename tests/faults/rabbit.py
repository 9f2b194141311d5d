"""A vhost of a test module's own on the local RabbitMQ (127.0.0.1:5672, guest/guest).

Made with `rabbitmqctl` and deleted after (bench.rabbit, shared with the benchmarks).
Where RabbitMQ is not there the test is skipped with the reason, except under CI=true,
where it fails.

A test that restarts the broker does it on a node of its own (`private_node`): restarting
the local one would drop the connections of every other test module running meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from bench.rabbit import HOST, USER, own_vhost, rabbit_missing, rabbitmqctl
from toolfleet.orchestrator.cli.embedded import free_port, wait_for

__all__ = [
    "RabbitNode",
    "close_connections",
    "private_node",
    "rabbit_vhost",
    "rabbitmqctl",
    "require_rabbit",
]

NODE_START_TIMEOUT_S = 60
NODE_STOP_TIMEOUT_S = 30
# The server runs as this user (Debian's rabbitmq-server wrapper switches to it from root).
SERVER_USER = "rabbitmq"


def require_rabbit() -> None:
    """Skip the test where RabbitMQ is not there (fail under CI=true), saying why."""
    missing = rabbit_missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"RabbitMQ is required under CI=true: {missing}")
        pytest.skip(missing)


@contextlib.contextmanager
def rabbit_vhost() -> Iterator[str]:
    """The amqp:// URL of a new vhost, deleted at the end (or skip/fail, see above)."""
    require_rabbit()
    with own_vhost("toolfleet-test") as url:
        yield url


def vhost_of(url: str) -> str:
    """The vhost of an amqp:// URL."""
    return unquote(urlparse(url).path.removeprefix("/")) or "/"


def close_connections(url: str) -> None:
    """Close every client connection to the vhost of `url` (RabbitMQ's side: as a broker
    restart does to them, the broker's other vhosts untouched)."""
    rabbitmqctl("close_all_connections", "-p", vhost_of(url), "closed by a toolfleet test")


@dataclass(frozen=True)
class RabbitNode:
    """A RabbitMQ node of a test's own: its name and the amqp:// URL of its default vhost."""

    name: str
    port: int

    @property
    def url(self) -> str:
        return f"amqp://{USER}:{USER}@{HOST}:{self.port}//"

    def restart(self) -> None:
        """Stop and start the node's RabbitMQ application: every connection drops; quorum
        queues keep their messages, and what was delivered unacknowledged is redelivered."""
        for command in ("stop_app", "start_app", "await_startup"):
            rabbitmqctl("-n", self.name, command)


@contextlib.contextmanager
def private_node() -> Iterator[RabbitNode]:
    """A RabbitMQ node on free ports with its data in a temporary folder, stopped and
    removed at the end (or skip/fail, see `require_rabbit`)."""
    require_rabbit()
    with tempfile.TemporaryDirectory(prefix="toolfleet-rabbit-") as folder:
        node = RabbitNode(f"toolfleet-test-{uuid.uuid4().hex[:8]}@localhost", free_port())
        process = subprocess.Popen(
            ["rabbitmq-server"],
            env=_node_env(Path(folder), node),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # the server and its helpers: one group to kill
        )
        try:
            _wait_started(process, node)
            yield node
        finally:
            _stop(process, node)


def _node_env(folder: Path, node: RabbitNode) -> dict[str, str]:
    """Settings that keep the node off the local one's name, ports, config and data."""
    if os.geteuid() == 0:
        shutil.chown(folder, user=SERVER_USER)  # the server writes its data here as that user
    config = folder / "rabbitmq.conf"
    config.write_text(f"listeners.tcp.local = {HOST}:{node.port}\n")
    plugins = folder / "enabled_plugins"
    plugins.write_text("[].\n")  # no management listener on the local node's port
    return {
        **os.environ,
        "RABBITMQ_NODENAME": node.name,
        "RABBITMQ_DIST_PORT": str(free_port()),
        "RABBITMQ_CONFIG_FILE": str(config),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(folder / "advanced.config"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(plugins),
        "RABBITMQ_MNESIA_BASE": str(folder / "mnesia"),
        "RABBITMQ_LOG_BASE": str(folder / "log"),
        "RABBITMQ_PID_FILE": str(folder / "node.pid"),
    }


def _wait_started(process: subprocess.Popen[bytes], node: RabbitNode) -> None:
    def listening() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"RabbitMQ node {node.name} exited at start ({process.returncode})")
        try:
            socket.create_connection((HOST, node.port), timeout=1).close()
        except OSError:
            return False
        return True

    # The port first (a cheap probe), then rabbitmqctl once: each of its runs boots a VM.
    wait_for(listening, NODE_START_TIMEOUT_S, f"RabbitMQ node {node.name} to listen")
    rabbitmqctl("-n", node.name, "await_startup")


def _stop(process: subprocess.Popen[bytes], node: RabbitNode) -> None:
    with contextlib.suppress(subprocess.SubprocessError):
        rabbitmqctl("-n", node.name, "stop")
    try:
        process.wait(NODE_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the group this function started
        process.wait(NODE_STOP_TIMEOUT_S)
