"""Hosts made of Linux network namespaces, joined by a bridge, for tests across machines.

`Network` makes a bridge in a namespace of its own, one veth from this (the root)
namespace into it (this process reaches every host at `network.gateway`), and per
`add_host(label)` a namespace with loopback up and a veth into the bridge holding its own
address on a private /24 (10.213.<random>.0/24). `host.popen([...])` runs a process in
the host (`ip netns exec`, which execs in place: the pid is the process's own);
`host.kill_all()` SIGKILLs every process in the namespace; `host.cut()` sets the host's
bridge port down - the host keeps its address and its sockets, and what it sends or is
sent is dropped without an error, as behind a broken switch - and `host.heal()` sets it
up again. `close()` kills every process and removes the namespaces (their veths go with
them); `sweep_leftovers()` removes those of earlier runs whose process is gone.

Names carry this process's pid and a per-network letter (tfn<pid><letter>), so runs in
parallel do not collide. Needs root and iproute2's `ip`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import random
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "tfn"
_NAME = re.compile(rf"^{PREFIX}(\d+)[a-z]")
_networks = itertools.count()


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, no `ip`, or the kernel refuses)."""


def ip(*args: str, check: bool = True) -> str:
    """Run `ip args...`; its stdout. Raises CalledProcessError with stderr on failure."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise subprocess.CalledProcessError(
            done.returncode, ["ip", *args], done.stdout, done.stderr
        )
    return done.stdout


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if shutil.which("ip") is None:
        return "no `ip` (iproute2) on PATH"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"{PREFIX}{os.getpid()}z-probe"
    try:
        ip("netns", "add", probe)
    except subprocess.CalledProcessError as e:
        return f"`ip netns add` failed: {e.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


def namespace_pids(namespace: str) -> list[int]:
    """Every process whose network namespace is `namespace`."""
    return [int(p) for p in ip("netns", "pids", namespace, check=False).split()]


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _kill_namespace(namespace: str, timeout_s: float = 10.0) -> None:
    """SIGKILL every process in the namespace until none is left (forks meanwhile too)."""
    deadline = time.monotonic() + timeout_s
    while pids := namespace_pids(namespace):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {pids} of namespace {namespace} outlived SIGKILL")
        time.sleep(0.02)  # ok: the kernel tears the killed processes down


def sweep_leftovers() -> list[str]:
    """Remove the namespaces and links of earlier runs whose process is gone; their names."""
    removed: list[str] = []
    for line in ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.strip() else ""
        match = _NAME.match(name)
        if match and _dead(int(match.group(1))):
            _kill_namespace(name)
            ip("netns", "del", name, check=False)
            removed.append(name)
    for line in ip("-o", "link", "show", check=False).splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        match = _NAME.match(name)
        if match and _dead(int(match.group(1))):
            ip("link", "del", name, check=False)
            removed.append(name)
    return removed


def _free_subnet() -> ipaddress.IPv4Network:
    """A 10.213.x.0/24 no address of this namespace is in (another run's, say)."""
    used = ip("-o", "-4", "addr", "show", check=False) + ip("-4", "route", "show", check=False)
    choices = list(range(1, 255))
    random.shuffle(choices)
    for third in choices:
        subnet = ipaddress.IPv4Network(f"10.213.{third}.0/24")
        if f"10.213.{third}." not in used:
            return subnet
    raise NetnsUnavailable("every 10.213.x.0/24 is in use here")


@dataclass
class Host:
    """One machine: a network namespace with one address on the network's subnet."""

    label: str
    namespace: str
    address: str
    port: str  # its veth's end in the bridge's namespace
    network: Network
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def popen(
        self, argv: Sequence[str], *, env: Mapping[str, str], log: Path, cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start `argv` in this host, its output appended to `log`; in a session of its own."""
        with log.open("ab") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.namespace, *argv],
                env=dict(env),
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.processes.append(process)
        return process

    def pids(self) -> list[int]:
        """Every process running in this host."""
        return namespace_pids(self.namespace)

    def kill_all(self) -> None:
        """SIGKILL every process of the host (as when the machine loses power), and reap ours."""
        _kill_namespace(self.namespace)
        for process in self.processes:
            process.wait(10)

    def cut(self) -> None:
        """Cut the host off: its bridge port goes down; nothing it sends or is sent arrives."""
        ip("-n", self.network.bridge_namespace, "link", "set", self.port, "down")

    def heal(self) -> None:
        """Plug the host back in: its connections carry on where TCP's retries find them."""
        ip("-n", self.network.bridge_namespace, "link", "set", self.port, "up")


class Network:
    """`with Network() as net: r = net.add_host("r")`: hosts on one bridge; all gone on exit."""

    def __init__(self) -> None:
        self.tag = f"{PREFIX}{os.getpid()}{chr(ord('a') + next(_networks) % 26)}"
        self.bridge_namespace = f"{self.tag}-br"
        self.subnet = _free_subnet()
        addresses = self.subnet.hosts()
        self.gateway = str(next(addresses))  # this namespace's address on the subnet
        self._addresses = addresses
        self.hosts: dict[str, Host] = {}
        self._namespaces: list[str] = []
        self._root_link = f"{self.tag}t"

    def _add_namespace(self, name: str) -> None:
        ip("netns", "add", name)
        self._namespaces.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def start(self) -> None:
        """Make the bridge and this namespace's port on it."""
        self._add_namespace(self.bridge_namespace)
        br = self.bridge_namespace
        ip("-n", br, "link", "add", "br0", "type", "bridge", "forward_delay", "0", "stp_state", "0")
        ip("-n", br, "link", "set", "br0", "up")
        self._plug(self._root_link, None, self.gateway)

    def _plug(self, port: str, namespace: str | None, address: str) -> None:
        """A veth from the bridge to `namespace` (None: this one) holding `address`."""
        br = self.bridge_namespace
        ip("link", "add", port, "type", "veth", "peer", "name", f"{port}p")
        ip("link", "set", f"{port}p", "netns", br)
        ip("-n", br, "link", "set", f"{port}p", "master", "br0")
        ip("-n", br, "link", "set", f"{port}p", "up")
        inside = () if namespace is None else ("-n", namespace)
        if namespace is not None:
            ip("link", "set", port, "netns", namespace)
            ip(*inside, "link", "set", port, "name", "eth0")
        name = port if namespace is None else "eth0"
        ip(*inside, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", name)
        ip(*inside, "link", "set", name, "up")

    def add_host(self, label: str) -> Host:
        """A new host `label` (at most 2 characters: link names are 15 at most)."""
        assert len(label) <= 2 and label.isalnum(), label
        namespace = f"{self.tag}-{label}"
        self._add_namespace(namespace)
        address = str(next(self._addresses))
        port = f"{self.tag}{label}"
        self._plug(port, namespace, address)
        host = Host(label, namespace, address, f"{port}p", self)
        self.hosts[label] = host
        return host

    def close(self) -> None:
        """Kill every process of every host, remove the namespaces (and so the veths)."""
        errors: list[str] = []
        for namespace in reversed(self._namespaces):
            try:
                _kill_namespace(namespace)
            except RuntimeError as e:
                errors.append(str(e))
        for host in self.hosts.values():
            for process in host.processes:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(10)
        for namespace in reversed(self._namespaces):
            ip("netns", "del", namespace, check=False)
        ip("link", "del", self._root_link, check=False)  # gone with its peer, normally
        self._namespaces.clear()
        if errors:
            raise RuntimeError("; ".join(errors))

    def __enter__(self) -> Network:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
