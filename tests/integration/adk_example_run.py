"""Run a ported ADK example as `python -m <module>` would: on the offline model, or
with `--gemini` through the real google-genai SDK against the Gemini REST stand-in.

    python -m tests.integration.adk_example_run examples.adk.stock_price [--gemini]
    python -m tests.integration.adk_example_run tests.integration.adk_drivers NAME

The example is untouched. Offline, TOOLFLEET_OFFLINE_MODELS names the scripts of
adk_example_models (the workers running agent tools read it too). With --gemini, an
API key and GOOGLE_GEMINI_BASE_URL send every model call, the workers' included, to
a stand-in that plays the same scripts; the last line counts what it answered.
Stand-ins of third-party packages (yfinance) come first on the import path.
"""

from __future__ import annotations

import argparse
import importlib
import os
import runpy
import sys
from pathlib import Path

from tests.gemini_stand_in import scripted_responder, serve_gemini

STAND_INS = str(Path(__file__).resolve().parent.parent / "stand_ins")
KEY = "stand-in-key"


def _use_stand_in_packages() -> None:
    sys.path.insert(0, STAND_INS)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [STAND_INS, os.environ.get("PYTHONPATH", "")])
    )


def _run(module: str, args: list[str]) -> None:
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def main(argv: list[str]) -> None:
    """Run the module as its `__main__` on the scripted models."""
    parser = argparse.ArgumentParser()
    parser.add_argument("module")
    parser.add_argument("args", nargs="*")
    parser.add_argument("--gemini", action="store_true")
    parser.add_argument("--models", default="tests.integration.adk_example_models:MODELS")
    options = parser.parse_args(argv)
    _use_stand_in_packages()
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "TOOLFLEET_OFFLINE_MODELS"):
        os.environ.pop(name, None)
    if not options.gemini:
        os.environ["TOOLFLEET_OFFLINE_MODELS"] = options.models
        _run(options.module, options.args)
        return
    module, _, attr = options.models.partition(":")
    models = getattr(importlib.import_module(module), attr)
    with serve_gemini(scripted_responder(models)) as gemini:
        os.environ["GOOGLE_API_KEY"] = KEY
        os.environ["GOOGLE_GEMINI_BASE_URL"] = gemini.base_url
        _run(options.module, options.args)
    keyed = sum(r.headers.get("x-goog-api-key") == KEY for r in gemini.requests)
    print(f"[stand-in] {len(gemini.requests)} requests, {keyed} with the API key")


if __name__ == "__main__":
    main(sys.argv[1:])
