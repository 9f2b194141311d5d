"""A vhost of a run's own on the local RabbitMQ (127.0.0.1:5672, guest/guest), for the
benchmarks and the tests alike.

Made with `rabbitmqctl` and deleted after, so that what a run declares (quorum queues,
messages left behind) goes with it.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator

HOST, PORT = "127.0.0.1", 5672
USER = "guest"
RABBITMQCTL_TIMEOUT_S = 60


class RabbitMissing(RuntimeError):
    """RabbitMQ is not there to measure on: the message says why."""


def rabbit_missing() -> str | None:
    """Why RabbitMQ cannot be measured here, or None."""
    if shutil.which("rabbitmqctl") is None:
        return "rabbitmqctl is not installed (it makes the run's own vhost)"
    try:
        socket.create_connection((HOST, PORT), timeout=2).close()
    except OSError as exc:
        return f"RabbitMQ is not listening on {HOST}:{PORT} ({exc})"
    return None


def rabbitmqctl(*args: str) -> None:
    """Run `rabbitmqctl` with these arguments; raises CalledProcessError if it fails."""
    subprocess.run(
        ["rabbitmqctl", *args], check=True, capture_output=True, timeout=RABBITMQCTL_TIMEOUT_S
    )


@contextlib.contextmanager
def own_vhost(prefix: str) -> Iterator[str]:
    """The amqp:// URL of a new vhost named `prefix-<random>`, deleted at the end (check
    `rabbit_missing` first)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    rabbitmqctl("add_vhost", name)
    try:
        rabbitmqctl("set_permissions", "-p", name, USER, ".*", ".*", ".*")
        yield f"amqp://{USER}:{USER}@{HOST}:{PORT}/{name}"
    finally:
        rabbitmqctl("delete_vhost", name)


@contextlib.contextmanager
def rabbit_vhost() -> Iterator[str]:
    """The amqp:// URL of a new vhost of the benchmark's own, deleted at the end.

    Raises:
        RabbitMissing: RabbitMQ or rabbitmqctl is not there (the message says which).
    """
    missing = rabbit_missing()
    if missing is not None:
        raise RabbitMissing(missing)
    with own_vhost("toolfleet-bench") as url:
        yield url
