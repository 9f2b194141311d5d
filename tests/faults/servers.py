"""A private redis-server the fault tests may stop, restart and configure (AOF, passwords)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from toolfleet.orchestrator.cli.embedded import BIND_TRIES, free_port, wait_for


class ExitedAtStart(RuntimeError):
    """The server exited before it answered (its port was taken, or its arguments bad)."""


class RedisServer:
    """`redis-server` on a free loopback port; `restart()` keeps the port and the data dir."""

    def __init__(self, extra_args: Sequence[str] = (), *, appendonly: bool = True) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("the fault tests need redis-server on PATH (apt install redis)")
        self.binary = binary
        self.port = free_port()
        self.extra_args = list(extra_args)
        self.appendonly = appendonly
        self._dir = tempfile.TemporaryDirectory(prefix="toolfleet-faults-redis-")
        self._process: subprocess.Popen[bytes] | None = None
        self.password: str | None = None  # set when extra_args carry --requirepass
        self._started_once = False

    @property
    def dir(self) -> Path:
        return Path(self._dir.name)

    def url(self, db: int = 0, *, username: str | None = None, password: str | None = None) -> str:
        auth = ""
        if password is not None:
            auth = f"{username or ''}:{password}@"
        return f"redis://{auth}127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        """Start the server; a first start whose port another process took first (the
        server exits at once) tries another port, up to BIND_TRIES: a restart keeps its
        port, which its clients name."""
        if not self._started_once:
            for _ in range(BIND_TRIES - 1):
                try:
                    self._start_once()
                    return
                except ExitedAtStart:
                    self.port = free_port()
        self._start_once()

    def _start_once(self) -> None:
        # fmt: off
        self._process = subprocess.Popen(
            [
                self.binary,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "yes" if self.appendonly else "no",
                # fsync every write: a restart in these tests must not lose an acknowledged one
                "--appendfsync", "always",
                "--dir", str(self.dir),
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        # fmt: on
        wait_for(self._answers, 10, f"redis-server on port {self.port} to start")
        self._started_once = True

    def _answers(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            raise ExitedAtStart(f"redis-server on port {self.port} exited at start")
        # One try, briefly: what answers on the port may be another process's, silent.
        client = redis.Redis(
            port=self.port,
            password=self.password,
            socket_timeout=1,
            socket_connect_timeout=1,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            return bool(client.ping())
        except redis.AuthenticationError:
            return True  # it answers; it just wants credentials
        except redis.RedisError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        """SIGTERM: a clean shutdown (the append-only file is flushed)."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(10)
        self._process = None

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)
        self._process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()
        self._dir.cleanup()
