"""The ADK-style programs of examples/adk_programs, run with InMemoryRunner on the
offline model and through the real google-genai SDK against the Gemini REST stand-in.

Each expected line (adk_programs_expected/<program>.txt) is what google-adk 2.13
printed when the same drivers ran the same program, its imports resolved to ADK's, with
a BaseLlm playing the same model turns (adk_program_models); adk_program_record.py
records them again. Programs run in a few processes, not one: the local fleet of one
process serves one module's tools per pool, so each process holds at most one program
with tools of its own.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest
from google.genai import types

from tests.integration.test_adk_examples import STAND_IN_LINE, run_program
from toolfleet.adk import RedisArtifactService
from toolfleet.shared.config import Settings

pytestmark = pytest.mark.integration

MODELS = "--models=tests.integration.adk_program_models:MODELS"
DRIVERS = "tests.integration.adk_program_drivers"
# ANY in an expected line matches anything there: a recorded load_memory response (ADK's
# holds MemoryEntry objects, which print as their repr), a call id.
ANY = "<any>"

# What google-adk printed for each program, one file a program.
RECORDED = Path(__file__).parent / "adk_programs_expected"
# Programs run together in one process: tool-less ones ride with one that has tools.
GROUPS: list[tuple[str, ...]] = [
    ("pantry",),
    ("thermostat",),
    ("front_desk",),
    ("newsletter",),
    ("leave_request", "recipe_card"),
    ("receipts",),
    ("notebook",),
    ("library", "briefing"),
    ("parcel_desk",),
    ("trivia",),
    ("payments",),
    ("city_guide",),
    ("visit_log",),
    ("order_desk",),
    ("countdown",),
    ("short_memory",),
]
# Model requests each group makes through the stand-in.
REQUESTS: dict[tuple[str, ...], int] = {
    ("pantry",): 3,
    ("thermostat",): 4,
    ("front_desk",): 6,
    ("newsletter",): 7,
    ("leave_request", "recipe_card"): 5,
    ("receipts",): 6,
    ("library", "briefing"): 5,
    ("parcel_desk",): 6,
    ("trivia",): 6,
    ("city_guide",): 4,
    ("countdown",): 4,
    ("short_memory",): 2,
    ("notebook",): 3,
    ("visit_log",): 2,
    ("order_desk",): 2,
    ("payments",): 7,
}
# Where toolfleet differs from ADK: strict xfails, not run through the stand-in again.
DIFFERS: dict[str, str] = {}  # none today


def sections(lines: list[str]) -> dict[str, list[str]]:
    """The printed lines under each `=== program` header."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith("=== "):
            current = found.setdefault(line[4:], [])
        elif current is not None:
            current.append(line)
    return found


def expected(program: str) -> list[str]:
    """The lines google-adk printed running this program."""
    return (RECORDED / f"{program}.txt").read_text().splitlines()


def check(program: str, got: list[str]) -> None:
    want = expected(program)
    assert len(got) == len(want), "\n".join(got)
    for line, wanted in zip(got, want, strict=True):
        pattern = ".*".join(re.escape(part) for part in wanted.split(ANY))
        assert re.fullmatch(pattern, line), f"{line!r} is not {wanted!r}"


def group_param(group: tuple[str, ...]) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=DIFFERS[p]) for p in group if p in DIFFERS]
    return pytest.param(group, id="+".join(group), marks=marks)


@pytest.mark.parametrize("group", [group_param(g) for g in GROUPS])
def test_on_the_offline_model(group: tuple[str, ...]) -> None:
    found = sections(run_program(f"{MODELS} {DRIVERS} {' '.join(group)}"))
    assert list(found) == list(group)
    for program in group:
        check(program, found[program])


@pytest.mark.parametrize("group", [group_param(g) for g in GROUPS if not set(g) & set(DIFFERS)])
def test_through_google_genai_against_the_gemini_stand_in(group: tuple[str, ...]) -> None:
    *lines, summary = run_program(f"{MODELS} {DRIVERS} {' '.join(group)}", "--gemini")
    found = sections(lines)
    assert list(found) == list(group)
    for program in group:
        check(program, found[program])
    counted = STAND_IN_LINE.match(summary)
    assert counted is not None, summary
    # Every model call went over HTTP, each carrying the key the SDK was given.
    assert int(counted[1]) == int(counted[2]) == REQUESTS[group]


def test_every_program_is_run_here() -> None:
    """A program added under examples/adk_programs/ without a test fails here."""
    written = {
        name
        for name in os.listdir("examples/adk_programs")
        if os.path.isdir(f"examples/adk_programs/{name}") and not name.startswith("_")
    }
    recorded = {name.removesuffix(".txt") for name in os.listdir(RECORDED)}
    assert written == recorded == {p for g in GROUPS for p in g}


async def test_the_artifact_service_lists_and_deletes_versions(settings: Settings) -> None:
    """ADK's BaseArtifactService.list_versions and delete_artifact, which a program may
    call on the runner's artifact_service (the receipts program reads versions by number)."""
    service = RedisArtifactService(settings)
    where = {"app_name": "receipts", "user_id": "u", "session_id": uuid.uuid4().hex}
    for text in ("first", "second"):
        await service.save_artifact(**where, filename="r.txt", artifact=types.Part(text=text))
    assert await service.list_versions(**where, filename="r.txt") == [0, 1]
    assert await service.list_versions(**where, filename="other.txt") == []
    await service.delete_artifact(**where, filename="r.txt")
    assert await service.list_versions(**where, filename="r.txt") == []
    assert await service.load_artifact(**where, filename="r.txt") is None
    assert await service.list_artifact_keys(**where) == []
