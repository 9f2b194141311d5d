"""The plugins of each app defined in this process, by app name.

An agent tool's agent runs on a worker, in a process of its own: it finds its app's
plugins here, registered when the worker imported the module that defines the App (as
ADK's nested run is given its parent runner's plugins).
"""

from __future__ import annotations

from collections.abc import Sequence

from toolfleet.orchestrator.plugins.base import BasePlugin

_PLUGINS: dict[str, tuple[BasePlugin, ...]] = {}


def register_app_plugins(app_name: str, plugins: Sequence[BasePlugin]) -> None:
    """Record `plugins` as the app `app_name`'s (the last App of a name defined wins)."""
    _PLUGINS[app_name] = tuple(plugins)


def app_plugins(app_name: str) -> tuple[BasePlugin, ...]:
    """The plugins of the app `app_name` defined in this process; none if it was not."""
    return _PLUGINS.get(app_name, ())
