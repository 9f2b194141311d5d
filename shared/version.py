"""toolfleet's version, from the installed distribution's metadata (pyproject.toml)."""

from __future__ import annotations

from importlib import metadata


def version() -> str:
    """The installed toolfleet's version; `0+unknown` when run from an uninstalled tree."""
    try:
        return metadata.version("toolfleet")
    except metadata.PackageNotFoundError:
        return "0+unknown"
