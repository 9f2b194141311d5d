"""The metrics' bounded labels: pending tickets by age band, and multiprocess mode chosen
before anything is recorded."""

from __future__ import annotations

import pytest

from toolfleet.shared import metrics as metrics_module
from toolfleet.shared.metrics import age_band, guarded, metrics, use_multiprocess


@pytest.mark.parametrize(
    ("age_s", "band"),
    [(0.0, "<1m"), (59.9, "<1m"), (60.0, "1m-1h"), (7200.0, "1h-1d"), (10 * 86400.0, ">1d")],
)
def test_pending_tickets_fall_in_four_age_bands(age_s: float, band: str) -> None:
    assert age_band(age_s) == band


def test_multiprocess_mode_is_refused_once_metrics_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics()  # made on first use, as any recording does
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    with pytest.raises(RuntimeError, match="before multiprocess mode"):
        use_multiprocess("/tmp/unused")
    assert metrics_module._metrics is not None


def test_a_failing_recording_is_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    with guarded():
        raise OSError("No space left on device")
    assert "recording a metric failed" in caplog.text
