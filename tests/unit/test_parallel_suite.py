"""How the suite is split across pytest-xdist workers (tests/parallel.py)."""

from __future__ import annotations

import pytest

from tests.parallel import database_url, make_scheduler, sendable, unit_of


def test_a_file_is_one_unit_and_every_file_of_tests_hosts_is_one_together() -> None:
    assert unit_of("tests/faults/test_load.py::test_x[redis]") == "tests/faults/test_load.py"
    assert unit_of("tests/hosts/test_across_hosts.py::test_a") == "tests/hosts"
    assert unit_of("tests/hosts/test_limits_across_hosts.py::test_b") == "tests/hosts"
    assert unit_of("tests/hostsx/test_c.py::test_c") == "tests/hostsx/test_c.py"


def test_each_worker_takes_the_database_numbered_after_it() -> None:
    assert database_url("redis://127.0.0.1:6379/9", None) == "redis://127.0.0.1:6379/9"
    assert database_url("redis://127.0.0.1:6379/9", 0) == "redis://127.0.0.1:6379/9"
    assert database_url("redis://127.0.0.1:6379/9", 2) == "redis://127.0.0.1:6379/11"
    assert database_url("redis://u:p@h:1", 1) == "redis://u:p@h:1/1"


def test_a_worker_past_database_15_is_refused_saying_why() -> None:
    with pytest.raises(ValueError, match="database 16"):
        database_url("redis://127.0.0.1:6379/9", 7)


def test_other_distributions_are_left_to_xdist(pytestconfig: pytest.Config) -> None:
    # Outside xdist (or with another --dist) the hook answers nothing.
    assert make_scheduler(pytestconfig, log=None) is None  # type: ignore[arg-type]


def test_lone_surrogates_in_captured_output_are_escaped_for_sending() -> None:
    report = pytest.TestReport(
        "t.py::t", ("t.py", 0, "t"), {}, "passed", None, "call",
        sections=[("Captured log call", "cannot parse \udc80")],
    )  # fmt: skip
    sendable(report)
    assert report.sections == [("Captured log call", "cannot parse \\udc80")]
    report.sections[0][1].encode("utf-8")
