"""py-amqp's frame reads, made larger for the io intake's consumer (`read_ahead`): what
one socket read returns beyond the frame being read serves the frames after it."""

from __future__ import annotations

import struct

from amqp.transport import TCPTransport

from toolfleet.shared.celery_wire.rabbitmq import extend_reads

FRAME_END = b"\xce"


def frame(channel: int, payload: bytes) -> bytes:
    """An AMQP body frame (type 3) on `channel`."""
    return struct.pack(">BHI", 3, channel, len(payload)) + payload + FRAME_END


class Socket:
    """A socket holding `data`, recording the sizes asked of `recv`."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.asked: list[int] = []

    def recv(self, size: int) -> bytes:
        self.asked.append(size)
        chunk, self.data = self.data[:size], self.data[size:]
        return chunk


def transport_on(socket: Socket) -> TCPTransport:
    transport = TCPTransport("127.0.0.1:5672")  # never connected: reads `socket`
    transport._quick_recv = socket.recv
    return transport


def test_py_amqp_reads_a_frame_in_three_exact_reads() -> None:
    socket = Socket(frame(1, b"first") + frame(1, b"second"))
    transport = transport_on(socket)
    assert transport.read_frame()[:3] == (3, 1, b"first")
    assert socket.asked == [7, 5, 1]  # header, payload, end: a system call each


def test_reads_made_larger_serve_the_next_frames_from_what_was_read() -> None:
    frames = [frame(1, f"message {n}".encode()) for n in range(20)]
    socket = Socket(b"".join(frames))
    transport = transport_on(socket)
    extend_reads(transport, 8192)

    read = [transport.read_frame()[2] for _ in frames]

    assert read == [f"message {n}".encode() for n in range(20)]
    assert socket.asked == [8192]  # one read for all twenty
