"""A TCP proxy in front of redis-server that loses replies: the fault "Redis applied the
command, then the connection broke before its reply came back".

Every command passes through to Redis. Once armed (`lose_reply_of`), the proxy finds
the next command that contains a given byte string, lets Redis run it, forwards the
replies of the commands before it, swallows its own reply and closes both connections.
The client sees a broken connection and cannot tell whether the command ran: that is
the case a retry must not apply twice.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class _Link:
    """One client connection and its upstream one, with the commands it carried."""

    client: socket.socket
    upstream: socket.socket
    sent: int = 0  # commands forwarded to Redis
    answered: int = 0  # replies forwarded to the client
    cut_at: int | None = None  # the command (1-based) whose reply is lost
    lock: threading.Lock = field(default_factory=threading.Lock)

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class ReplyLosingProxy:
    """`url` leads to Redis at `host:port` through this proxy."""

    def __init__(self, host: str, port: int, db: int = 0) -> None:
        self._upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/{db}"
        self._lock = threading.Lock()
        self._armed: list[bytes] = []  # one pattern per reply to lose, in order
        self._each: set[bytes] = set()  # every distinct command with one loses a reply
        self._cut: set[bytes] = set()  # the commands cut already (a retry is identical)
        self.lost: list[bytes] = []  # the commands whose replies were lost
        self._links: list[_Link] = []
        self._closed = False

    def lose_reply_of(self, pattern: bytes, times: int = 1) -> None:
        """Lose the reply of each of the next `times` commands containing `pattern`."""
        with self._lock:
            self._armed.extend([pattern] * times)

    def lose_each_reply_of(self, pattern: bytes) -> None:
        """Lose one reply of every distinct command containing `pattern` (its retry, the
        same bytes again, gets its reply) until `disarm`."""
        with self._lock:
            self._each.add(pattern)

    def disarm(self) -> None:
        """Lose no more replies."""
        with self._lock:
            self._armed.clear()
            self._each.clear()

    @property
    def armed(self) -> int:
        """How many replies are still to be lost."""
        with self._lock:
            return len(self._armed)

    def __enter__(self) -> ReplyLosingProxy:
        threading.Thread(target=self._accept, daemon=True, name="reply-loss accept").start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            link = _Link(client, socket.create_connection(self._upstream))
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._requests, args=(link,), daemon=True).start()
            threading.Thread(target=self._replies, args=(link,), daemon=True).start()

    def _take(self, command: bytes) -> bool:
        """Whether this command's reply is to be lost (the first armed pattern it has)."""
        with self._lock:
            if self._armed and self._armed[0] in command:
                self._armed.pop(0)
            elif command in self._cut or not any(p in command for p in self._each):
                return False
            self._cut.add(command)
            self.lost.append(command)
            return True

    def _requests(self, link: _Link) -> None:
        """Client -> Redis, command by command; nothing after the one to cut."""
        pending = b""
        try:
            while chunk := link.client.recv(65536):
                pending += chunk
                forward = 0
                while (end := _resp_end(pending, forward)) is not None:
                    command, forward = pending[forward:end], end
                    with link.lock:
                        link.sent += 1
                        if self._take(command):
                            link.cut_at = link.sent
                    if link.cut_at is not None:
                        break  # nothing after it reaches Redis: the connection is gone
                link.upstream.sendall(pending[:forward])
                pending = pending[forward:]
                if link.cut_at is not None:
                    return
        except OSError:
            pass
        finally:
            if link.cut_at is None:
                link.close()

    def _replies(self, link: _Link) -> None:
        """Redis -> client, reply by reply; at the cut, swallow the reply and close."""
        pending = b""
        try:
            while chunk := link.upstream.recv(65536):
                pending += chunk
                forward, cut = 0, False
                while (end := _resp_end(pending, forward)) is not None:
                    with link.lock:
                        link.answered += 1
                        cut = link.cut_at is not None and link.answered >= link.cut_at
                    if cut:
                        break  # Redis ran it; its reply never arrives
                    forward = end
                link.client.sendall(pending[:forward])
                pending = pending[forward:]
                if cut:
                    break
        except OSError:
            pass
        finally:
            link.close()


def _resp_end(data: bytes, start: int) -> int | None:
    """Where the RESP value (a command or a reply; RESP2 or RESP3) at `start` ends; None
    if `data` does not hold all of it yet."""
    line_end = data.find(b"\r\n", start)
    if line_end < 0:
        return None
    kind, header, after = data[start : start + 1], data[start + 1 : line_end], line_end + 2
    if kind in b"+-:_#,(":  # one line
        return after
    if kind in b"$=!":  # a length, then that many bytes
        size = int(header)
        if size < 0:
            return after
        return after + size + 2 if len(data) >= after + size + 2 else None
    if kind in b"*~>%|":  # an aggregate: n values (n pairs for a map or an attribute)
        count = max(int(header), 0) * (2 if kind in b"%|" else 1)
        position: int | None = after
        for _ in range(count):
            position = _resp_end(data, position)
            if position is None:
                return None
        if kind == b"|":  # an attribute comes before the reply it describes
            return _resp_end(data, position) if position is not None else None
        return position
    raise ValueError(f"not RESP at {start}: {data[start : start + 20]!r}")


@contextlib.contextmanager
def reply_losing_proxy(redis_url: str) -> Iterator[ReplyLosingProxy]:
    """A proxy to the Redis of `redis_url` (same database)."""
    from redis.connection import parse_url

    parts = parse_url(redis_url)
    with ReplyLosingProxy(parts.get("host", "127.0.0.1"), parts.get("port", 6379),
                          parts.get("db", 0)) as proxy:  # fmt: skip
        yield proxy
