"""Loaded by a worker (TOOLFLEET_TOOL_MODULES), before it makes its HandOff: the worker
holds a call it hands on for a minute, not a fraction of a second, so that a test can
kill it while it holds one."""

from __future__ import annotations

from functools import partial

from toolfleet.workers import app as worker_app
from toolfleet.workers.handoff import HandOff

HOLD_S = 60.0

worker_app.HandOff = partial(HandOff, delay_s=HOLD_S)  # type: ignore[attr-defined, assignment]
