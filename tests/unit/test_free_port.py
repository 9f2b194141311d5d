"""The embedded server's port: free when chosen, and out of the range the OS gives
outgoing connections, so that no client is given it before the server binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from toolfleet.orchestrator.cli import embedded
from toolfleet.orchestrator.cli.embedded import LOWEST_PORT, free_port


def ephemeral_range(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ip_local_port_range"
    path.write_text(text)
    monkeypatch.setattr(embedded, "EPHEMERAL_RANGE", path)


def bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_a_port_is_chosen_free_below_the_ephemeral_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ephemeral_range(tmp_path, "20000\t60999\n", monkeypatch)
    ports = {free_port() for _ in range(20)}
    assert all(LOWEST_PORT <= port < 20000 for port in ports)
    assert len(ports) > 1  # at random: two starts at once rarely meet
    assert all(bindable(port) for port in ports)


def test_a_port_taken_is_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # Only the taken port and the next lie below the range.
        ephemeral_range(tmp_path, f"{port + 2} 60999", monkeypatch)
        monkeypatch.setattr(embedded, "LOWEST_PORT", port)
        chosen = {free_port() for _ in range(10)}
    assert port not in chosen


def test_with_no_room_below_the_range_the_os_picks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ephemeral_range(tmp_path, "1024 65535", monkeypatch)
    port = free_port()
    assert port >= 1024 and bindable(port)


def test_without_the_range_linuxs_default_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded, "EPHEMERAL_RANGE", tmp_path / "missing")
    assert LOWEST_PORT <= free_port() < embedded.EPHEMERAL_LOW
