"""A second virtualenv, `<repo>/.venv-adk`, with google-adk 2.x and so google-genai 2.x.

google-adk 2.x pins google-genai below 3 while the dev virtualenv has google-genai 3, so
the tests that need ADK (or that check toolfleet on google-genai 2.x) run their code with
this interpreter in a subprocess. It holds toolfleet installed editable with the `dev` and
`adk-web` extras, from the index pip is configured with.

It is built on first use and reused while its stamp matches: a hash of pyproject.toml, of
the install command and of the Python version. A file lock beside it keeps two pytest
processes from building it at once; the stamp is written last, so a build that was cut
short is started again from scratch.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
VENV_DIR = REPO_ROOT / ".venv-adk"
LOCK_PATH = REPO_ROOT / ".venv-adk.lock"
STAMP_NAME = "toolfleet-stamp"
EXTRAS = "dev,adk-web"
# A cold pip cache downloads google-adk's and the dev extra's wheels: minutes, not seconds.
BUILD_TIMEOUT_S = 900
CHECK_TIMEOUT_S = 120
OUTPUT_TAIL_CHARS = 3000
# Read by the checks below and by tests that want the versions the venv has.
VERSIONS_SCRIPT = (
    "import google.adk, google.genai; print(google.genai.__version__, google.adk.__version__)"
)

# Settings of the calling interpreter that would point the new venv's pip or Python elsewhere.
_DROPPED_ENV = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PIP_USER")


class AdkVenvError(RuntimeError):
    """The ADK virtualenv could not be built or does not hold google-genai 2.x."""


_failure: AdkVenvError | None = None


def adk_venv() -> Path:
    """The python of `<repo>/.venv-adk`, built first when its stamp does not match.

    Returns:
        The path of the virtualenv's `bin/python`.

    Raises:
        AdkVenvError: the build failed (the message has the tail of pip's output), or the
            virtualenv does not have google-genai 2.x and google.adk. Raised again, without
            a second try, on later calls in the same process.
    """
    global _failure
    if _failure is not None:
        raise _failure
    try:
        return _ensure_built()
    except AdkVenvError as exc:
        _failure = exc
        raise


def venv_python() -> Path:
    """Where the virtualenv's interpreter is (it may not be built yet).

    Returns:
        `<repo>/.venv-adk/bin/python`.
    """
    return VENV_DIR / "bin" / "python"


def expected_stamp() -> str:
    """The stamp a virtualenv built from this checkout's pyproject.toml has.

    Returns:
        A hex digest of pyproject.toml, the install command and the Python version.
    """
    digest = hashlib.sha256()
    digest.update((REPO_ROOT / "pyproject.toml").read_bytes())
    digest.update(" ".join(_install_command()).encode())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def clean_env() -> dict[str, str]:
    """This process's environment less what would tie a subprocess to the dev virtualenv.

    Returns:
        A copy of os.environ without VIRTUAL_ENV, PYTHONPATH and the like.
    """
    return {name: value for name, value in os.environ.items() if name not in _DROPPED_ENV}


def _ensure_built() -> Path:
    stamp = expected_stamp()
    if _stamp_matches(stamp):
        return venv_python()
    with _build_lock():
        # Another process may have built it while this one waited for the lock.
        if not _stamp_matches(stamp):
            _build()
            _check_versions()
            (VENV_DIR / STAMP_NAME).write_text(stamp + "\n")
    return venv_python()


def _stamp_matches(stamp: str) -> bool:
    path = VENV_DIR / STAMP_NAME
    try:
        return path.read_text().strip() == stamp and venv_python().exists()
    except OSError:
        return False


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    # Outside the venv's folder: a rebuild removes that folder, and with it any lock inside.
    with LOCK_PATH.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _install_command() -> list[str]:
    return [
        str(venv_python()), "-m", "pip", "install", "-q", "-e", f"{REPO_ROOT}[{EXTRAS}]",
    ]  # fmt: skip


def _build_steps() -> list[tuple[list[str], float, str]]:
    """Each step's command, its time limit, and what to call it in an error."""
    return [
        ([sys.executable, "-m", "venv", str(VENV_DIR)], CHECK_TIMEOUT_S, "python -m venv"),
        (_install_command(), BUILD_TIMEOUT_S, f"pip install -e .[{EXTRAS}]"),
    ]


def _build() -> None:
    shutil.rmtree(VENV_DIR, ignore_errors=True)
    for command, timeout_s, what in _build_steps():
        _run(command, timeout_s, what)


def _check_versions() -> None:
    done = _run([str(venv_python()), "-c", VERSIONS_SCRIPT], CHECK_TIMEOUT_S, "import google.adk")
    genai_version = done.stdout.split()[0] if done.stdout.split() else "?"
    if not genai_version.startswith("2."):
        raise AdkVenvError(
            f"{VENV_DIR} has google-genai {genai_version}, not 2.x: google-adk's pin changed?"
        )


def _run(command: list[str], timeout_s: float, what: str) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(
            command,
            cwd=REPO_ROOT,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AdkVenvError(f"building {VENV_DIR}: {what} ran past {timeout_s:.0f} s") from exc
    except OSError as exc:
        raise AdkVenvError(f"building {VENV_DIR}: {what} could not start: {exc}") from exc
    if done.returncode != 0:
        output = (done.stdout + done.stderr)[-OUTPUT_TAIL_CHARS:]
        raise AdkVenvError(f"building {VENV_DIR}: {what} exited {done.returncode}:\n{output}")
    return done
