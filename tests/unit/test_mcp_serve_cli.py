"""`toolfleet mcp serve` refuses what it cannot serve safely, saying what to change."""

from __future__ import annotations

import pytest

from toolfleet.orchestrator.cli.main import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tools", "x", "--transport", "http", "--host", "0.0.0.0"], "binds to loopback only"),
        (["--tools", "x", "--transport", "http", "--host", "example.com"], "authenticating proxy"),
        # Loopback, but not a name the SDK's DNS-rebinding checks protect.
        (["--tools", "x", "--transport", "http", "--host", "127.0.0.2"], "loopback only"),
        ([], "pass one of --agent module:attribute or --tools"),
        (["--agent", "a:b", "--tools", "x"], "pass one of"),
    ],
)
def test_refused_with_what_to_change(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", "serve", *argv]) == 2
    assert message in capsys.readouterr().err
