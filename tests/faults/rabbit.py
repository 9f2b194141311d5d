"""A vhost of a test module's own on the local RabbitMQ (127.0.0.1:5672, guest/guest).

Made with `rabbitmqctl` and deleted after. Where RabbitMQ is not there the test is
skipped with the reason, except under CI=true, where it fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator

import pytest

RABBIT_HOST, RABBIT_PORT = "127.0.0.1", 5672
RABBITMQCTL_TIMEOUT_S = 60


def rabbit_missing() -> str | None:
    """Why the RabbitMQ tests cannot run here, or None."""
    if shutil.which("rabbitmqctl") is None:
        return "rabbitmqctl is not installed (it makes the tests' own vhost)"
    try:
        socket.create_connection((RABBIT_HOST, RABBIT_PORT), timeout=2).close()
    except OSError as exc:
        return f"RabbitMQ is not listening on {RABBIT_HOST}:{RABBIT_PORT} ({exc})"
    return None


def rabbitmqctl(*args: str) -> None:
    subprocess.run(
        ["rabbitmqctl", *args], check=True, capture_output=True, timeout=RABBITMQCTL_TIMEOUT_S
    )


@contextlib.contextmanager
def rabbit_vhost() -> Iterator[str]:
    """The amqp:// URL of a new vhost, deleted at the end (or skip/fail, see above)."""
    missing = rabbit_missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"RabbitMQ is required under CI=true: {missing}")
        pytest.skip(missing)
    name = f"toolfleet-test-{uuid.uuid4().hex[:8]}"
    rabbitmqctl("add_vhost", name)
    try:
        rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        yield f"amqp://guest:guest@{RABBIT_HOST}:{RABBIT_PORT}/{name}"
    finally:
        rabbitmqctl("delete_vhost", name)
