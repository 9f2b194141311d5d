"""A Sentinel-managed Redis for the fault tests: a master, a replica and three sentinels.

Everything listens on free loopback ports. The sentinels declare a master down after
DOWN_AFTER_MS without a reply, so a SIGKILLed master is replaced in about 1-3 s.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import redis

from tests.faults.servers import RedisServer
from toolfleet.orchestrator.cli.embedded import free_port, wait_for

SERVICE = "toolfleet"
DOWN_AFTER_MS = 500
FAILOVER_TIMEOUT_MS = 3000
SENTINELS = 3
QUORUM = 2
READY_S = 30.0


def _as_dict(reply: object) -> dict[str, str]:
    """A Sentinel reply (a dict, or a flat list of fields and values) as text."""
    if isinstance(reply, dict):
        return {str(k): str(v) for k, v in reply.items()}
    fields = iter(reply)  # type: ignore[call-overload]
    return {str(k): str(v) for k, v in zip(fields, fields, strict=True)}


class _Sentinel:
    """`redis-server --sentinel` with a config file of its own (Sentinel rewrites it)."""

    def __init__(self, directory: Path, master_port: int) -> None:
        self.port = free_port()
        self._conf = directory / f"sentinel-{self.port}.conf"
        self._conf.write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            f"dir {directory}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {master_port} {QUORUM}\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        self._process: subprocess.Popen[bytes] | None = None
        self.client = redis.Redis(port=self.port, socket_timeout=1, decode_responses=True)

    def start(self, binary: str) -> None:
        self._process = subprocess.Popen(
            [binary, str(self._conf), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def master(self) -> dict[str, str]:
        """SENTINEL MASTER of the service, as this sentinel sees it ({} if it does not answer)."""
        try:
            reply = self.client.execute_command("SENTINEL", "MASTER", SERVICE)
        except redis.RedisError:
            return {}
        return _as_dict(reply)

    def replicas(self) -> list[dict[str, str]]:
        """SENTINEL REPLICAS of the service ([] if this sentinel does not answer)."""
        try:
            reply = self.client.execute_command("SENTINEL", "REPLICAS", SERVICE)
        except redis.RedisError:
            return []
        return [_as_dict(r) for r in reply]

    def kill(self) -> None:
        self.client.close()
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)


class SentinelRedis:
    """A master, its replica and three sentinels; `kill_master()` SIGKILLs the master and
    `wait_for_failover()` waits until the sentinels promote the replica."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("the fault tests need redis-server on PATH (apt install redis)")
        self._binary = binary
        self._dir = tempfile.TemporaryDirectory(prefix="toolfleet-faults-sentinel-")
        self.nodes = [RedisServer(appendonly=False), RedisServer(appendonly=False)]
        self.master = self.nodes[0]
        self.nodes[1].extra_args = ["--replicaof", "127.0.0.1", str(self.master.port)]
        self.sentinels = [
            _Sentinel(Path(self._dir.name), self.master.port) for _ in range(SENTINELS)
        ]
        self.failovers = 0

    def url(self, db: int = 0) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/{db}"

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        for sentinel in self.sentinels:
            sentinel.start(self._binary)
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Until every sentinel names the master, knows the others and sees a replica in
        sync with it: only then can a failover pick a replica."""

        def ready() -> bool:
            for sentinel in self.sentinels:
                seen = sentinel.master()
                if (
                    seen.get("port") != str(self.master.port)
                    or "down" in seen.get("flags", "down")
                    or seen.get("num-other-sentinels") != str(SENTINELS - 1)
                    or seen.get("num-slaves") != "1"
                ):
                    return False
                replica = sentinel.replicas()
                if not replica or replica[0].get("flags") != "slave":  # not down nor disconnected
                    return False
            return self._replica_in_sync()

        wait_for(ready, READY_S, "the sentinels to see a master, a replica and each other")

    def _replica_in_sync(self) -> bool:
        client = redis.Redis(port=self.replica.port, socket_timeout=1, decode_responses=True)
        try:
            info = client.info("replication")
        except redis.RedisError:
            return False
        finally:
            client.close()
        return info.get("role") == "slave" and info.get("master_link_status") == "up"

    @property
    def replica(self) -> RedisServer:
        return next(node for node in self.nodes if node is not self.master)

    def pause_replica(self) -> None:
        """SIGSTOP the replica: it stays connected to the master and acknowledges nothing."""
        self._signal_replica(signal.SIGSTOP)

    def resume_replica(self) -> None:
        self._signal_replica(signal.SIGCONT)

    def _signal_replica(self, signum: signal.Signals) -> None:
        process = self.replica._process
        assert process is not None
        process.send_signal(signum)

    def kill_master(self) -> RedisServer:
        """SIGKILL the master (no shutdown, no last write to the replica); the killed node."""
        killed = self.master
        killed.kill()
        return killed

    def wait_for_failover(self, timeout_s: float = 20.0) -> None:
        """Wait until every sentinel names the replica as master and it answers as one."""
        promoted = self.replica

        def promoted_everywhere() -> bool:
            return all(s.master().get("port") == str(promoted.port) for s in self.sentinels)

        wait_for(promoted_everywhere, timeout_s, f"the sentinels to promote port {promoted.port}")
        self.master = promoted
        self.failovers += 1

    def restore(self) -> None:
        """Start the killed node again, as the new master's replica, and wait until the
        sentinels could fail over once more."""
        killed = self.replica
        killed.extra_args = ["--replicaof", "127.0.0.1", str(self.master.port)]
        killed.start()
        self._wait_ready()

    def __enter__(self) -> SentinelRedis:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for sentinel in self.sentinels:
            sentinel.kill()
        for node in self.nodes:
            node.__exit__(None, None, None)
        self._dir.cleanup()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
