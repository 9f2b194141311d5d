"""No page of the server is shown inside another site's frame (clickjacking): the dev UI,
the docs and the approvals page, whose buttons act with the server's own origin."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from examples import reimbursement
from toolfleet.orchestrator.httpapi import HttpSettings, adk_dev_ui, serve_http
from toolfleet.shared.config import Settings

pytestmark = pytest.mark.integration


async def test_every_page_and_answer_refuses_to_be_framed(
    settings: Settings,
    orchestrator_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    (tmp_path / "index.html").write_text("<html><body>dev UI</body></html>")
    monkeypatch.setattr(adk_dev_ui, "dev_ui_folder", lambda: tmp_path)
    # No identities: a loopback server, whose every page acts as its one operator.
    http = HttpSettings(token=None)
    async with (
        serve_http([reimbursement.agent], settings, http, "127.0.0.1", 0) as running,
        httpx.AsyncClient(base_url=running.url, timeout=30) as client,
    ):
        for path in ("/adk/dev-ui/", "/docs", "/redoc", "/approvals", "/timeline", "/apps"):
            answer = await client.get(path)
            assert answer.status_code == 200, (path, answer.text)
            assert answer.headers.get("x-frame-options") == "SAMEORIGIN", path
        refused = await client.get("/apps", headers={"Host": "evil.example"})
        assert refused.status_code == 403
        assert refused.headers.get("x-frame-options") == "SAMEORIGIN"
