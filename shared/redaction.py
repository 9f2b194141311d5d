"""Hide the values of secret-named tool arguments wherever arguments are shown."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"


def redact_args(args: Mapping[str, Any], secret_names: Iterable[str]) -> dict[str, Any]:
    """A copy of `args` with the values of secret-named keys masked (case-insensitive)."""
    secrets = {name.lower() for name in secret_names}
    return {k: (MASK if k.lower() in secrets else v) for k, v in args.items()}
