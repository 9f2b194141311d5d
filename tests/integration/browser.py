"""Headless Chromium driven over the DevTools protocol (a websocket), for page tests.

Just what the approvals-page test needs: open a page, evaluate JavaScript, wait for
a condition in the page (a MutationObserver, not polling), click with the mouse,
take a screenshot. The browser is Debian's `chromium` package.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

FLAGS = [
    "--headless",
    "--no-sandbox",  # root in a container: the sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--no-default-browser-check",
    "--window-size=1200,800",
    "--remote-debugging-port=0",
]
START_TIMEOUT_S = 30


def artifacts_dir(tmp_path: Path) -> Path:
    """Where a page test saves its screenshots: TOOLFLEET_TEST_ARTIFACTS (CI keeps that
    folder), else the test's own `tmp_path`."""
    configured = os.environ.get("TOOLFLEET_TEST_ARTIFACTS")
    folder = Path(configured) if configured else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# Resolves once cond() is true, re-checked on every change of the document.
_WAIT_JS = """(cond, timeoutMs, what) => new Promise((resolve, reject) => {
  const check = () => { try { return Boolean(cond()); } catch (e) { return false; } };
  if (check()) { resolve(true); return; }
  const observer = new MutationObserver(() => {
    if (check()) { observer.disconnect(); clearTimeout(timer); resolve(true); }
  });
  observer.observe(document, {subtree: true, childList: true, attributes: true,
                              characterData: true});
  const timer = setTimeout(() => {
    observer.disconnect(); reject(new Error("timed out waiting for " + what));
  }, timeoutMs);
})"""


def find_chromium() -> str | None:
    configured = os.environ.get("TOOLFLEET_TEST_CHROMIUM")
    if configured:
        return configured
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class PageError(AssertionError):
    """JavaScript in the page threw, or the browser refused a command."""


class Page:
    def __init__(self, ws: ClientConnection) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}
        self._recorders: dict[str, list[list[dict[str, Any]]]] = {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self._ws:
            message = json.loads(raw)
            if "id" in message:
                future = self._replies.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message)
            for waiter in self._events.pop(message.get("method", ""), []):
                if not waiter.done():
                    waiter.set_result(message.get("params", {}))
            for recorded in self._recorders.get(message.get("method", ""), []):
                recorded.append(message.get("params", {}))

    async def close(self) -> None:
        await self._ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        command_id = next(self._ids)
        reply = asyncio.get_running_loop().create_future()
        self._replies[command_id] = reply
        await self._ws.send(json.dumps({"id": command_id, "method": method, "params": params}))
        message = await asyncio.wait_for(reply, START_TIMEOUT_S)
        if "error" in message:
            raise PageError(f"{method}: {message['error']}")
        result: dict[str, Any] = message.get("result", {})
        return result

    def expect(self, event: str) -> asyncio.Future[dict[str, Any]]:
        """A future for the next `event`; ask for it before the action that causes it."""
        future = asyncio.get_running_loop().create_future()
        self._events.setdefault(event, []).append(future)
        return future

    def record(self, event: str) -> list[dict[str, Any]]:
        """A list that every later `event`'s params are appended to, as they come (enable
        the event's domain, e.g. `Network.enable`, for the browser to send them)."""
        recorded: list[dict[str, Any]] = []
        self._recorders.setdefault(event, []).append(recorded)
        return recorded

    async def goto(self, url: str) -> None:
        loaded = self.expect("Page.loadEventFired")
        await self.send("Page.navigate", url=url)
        await asyncio.wait_for(loaded, START_TIMEOUT_S)

    async def evaluate(self, expression: str, timeout_s: float = START_TIMEOUT_S) -> Any:
        result = await asyncio.wait_for(
            self.send(
                "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
            ),
            timeout_s + 5,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise PageError(text)
        return result["result"].get("value")

    async def wait_for(self, condition: str, timeout_s: float) -> None:
        """Until the JavaScript expression `condition` is true in the page."""
        what = json.dumps(condition)
        await self.evaluate(
            f"({_WAIT_JS})(() => ({condition}), {int(timeout_s * 1000)}, {what})", timeout_s
        )

    async def click(self, selector: str) -> None:
        """A real left click (mouse pressed and released) in the middle of the element."""
        x, y = await self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1
            )

    async def screenshot(self, path: Path) -> Path:
        shot = await self.send("Page.captureScreenshot", format="png")
        await asyncio.to_thread(_write, path, base64.b64decode(shot["data"]))
        return path


@contextlib.asynccontextmanager
async def chromium_page(binary: str, profile_dir: Path) -> AsyncIterator[Page]:
    """A headless Chromium with one page; the browser is stopped at the end."""
    process = await asyncio.create_subprocess_exec(
        binary,
        *FLAGS,
        f"--user-data-dir={profile_dir}",
        "about:blank",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its helper processes go with it
    )
    log: list[str] = []
    drain: asyncio.Task[None] | None = None
    try:
        assert process.stderr is not None
        try:
            endpoint = await asyncio.wait_for(_devtools_url(process.stderr, log), START_TIMEOUT_S)
            http_base = endpoint.replace("ws://", "http://").split("/devtools/")[0]
            async with httpx.AsyncClient(timeout=START_TIMEOUT_S) as client:
                targets = (await client.get(f"{http_base}/json/list")).json()
            page_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        except (TimeoutError, StopIteration, OSError, httpx.HTTPError) as exc:
            raise AssertionError(f"chromium did not start: {exc!r}\n{''.join(log[-20:])}") from exc
        drain = asyncio.create_task(_drain(process.stderr, log))
        async with connect(page_url, max_size=64 * 1024 * 1024) as ws:
            page = Page(ws)
            await page.send("Page.enable")
            try:
                yield page
            finally:
                await page.close()
    finally:
        await _stop(process)
        if drain is not None:
            drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drain


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


async def _devtools_url(stderr: asyncio.StreamReader, log: list[str]) -> str:
    while line := (await stderr.readline()).decode(errors="replace"):
        log.append(line)
        if line.startswith("DevTools listening on "):
            return line.removeprefix("DevTools listening on ").strip()
    raise OSError("chromium exited before it listened")


async def _drain(stderr: asyncio.StreamReader, log: list[str]) -> None:
    while line := await stderr.readline():
        log.append(line.decode(errors="replace"))


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # the group we started, by its id
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
