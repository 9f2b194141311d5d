"""The orchestrator's event loop: uvloop where installed, asyncio's by choice."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from toolfleet.orchestrator import event_loop
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError


def test_auto_runs_the_orchestrator_on_uvloop_where_it_is_installed() -> None:
    uvloop = pytest.importorskip("uvloop")

    async def which() -> type[asyncio.AbstractEventLoop]:
        return type(asyncio.get_running_loop())

    assert event_loop.loop_factory(Settings()) is uvloop.new_event_loop
    assert event_loop.run(which(), Settings()) is uvloop.Loop


def test_asyncio_keeps_asyncios_own_loop() -> None:
    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    settings = Settings(event_loop="asyncio")
    assert event_loop.loop_factory(settings) is None
    assert event_loop.run(which(), settings).startswith("asyncio")


def test_without_uvloop_auto_falls_back_and_uvloop_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name, *a)
    )
    assert event_loop.loop_factory(Settings()) is None
    with pytest.raises(ConfigError, match="TOOLFLEET_EVENT_LOOP=uvloop, but uvloop is not"):
        event_loop.loop_factory(Settings(event_loop="uvloop"))
