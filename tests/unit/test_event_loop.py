"""The event loops of the orchestrator and of a worker's coroutine calls: uvloop where
installed, asyncio's by choice."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Literal

import pytest

from toolfleet.shared import event_loop
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError
from toolfleet.workers import call_loop as call_loop_module


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


async def _loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


@pytest.mark.parametrize("choice", ["auto", "asyncio"])
def test_a_workers_coroutine_calls_run_on_the_loop_the_settings_choose(
    choice: Literal["auto", "asyncio"], monkeypatch: pytest.MonkeyPatch
) -> None:
    uvloop = pytest.importorskip("uvloop")
    monkeypatch.setattr(call_loop_module, "_call_loop", None)  # this process's, made anew
    monkeypatch.setattr(call_loop_module, "_new_loop", None)
    call_loop_module.use_loop_factory(event_loop.loop_factory(Settings(event_loop=choice)))
    loop = call_loop_module.call_loop()
    try:
        ran_on = loop.run(_loop_type(), 5)
    finally:
        loop.close()
    assert issubclass(ran_on, uvloop.Loop) is (choice == "auto")
