"""A real headless Chromium (Debian's ``chromium`` package, installed by scripts/setup.sh),
driven over the Chrome DevTools Protocol.

Why CDP and not Selenium or Playwright: CDP is what both of those speak underneath, and
talking it directly needs only a WebSocket client (aiohttp, already installed with
`datasets`/fsspec): no chromedriver whose version must match the browser, no Node runtime,
no browser download. It also gives what the tests assert on and the others hide or make
awkward: every network request the page makes (``Network.requestWillBeSent``, to prove the
pages load nothing from outside the folder), full-page screenshots, and JavaScript
evaluation in the page.

The browser runs with --headless --no-sandbox --disable-gpu --disable-background-networking
--disable-component-update --disable-sync --no-first-run and a fresh --user-data-dir, and
is stopped (by its pid) when the fixture ends.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

import pytest
from quality_fixtures import ROOT

ARTIFACTS = ROOT / "test-artifacts"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
)


def chromium_path() -> Optional[str]:
    return os.environ.get("SCIGA_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    def __init__(self, browser: Browser, ws):
        self.browser = browser
        self.ws = ws
        self._id = 0
        self._pending: dict[int, asyncio.Future] = {}
        self.events: list[dict] = []
        self._reader = browser.loop.create_task(self._read())

    async def _read(self):
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def _send(self, method: str, params: Optional[dict] = None) -> dict:
        self._id += 1
        fut = self.browser.loop.create_future()
        self._pending[self._id] = fut
        await self.ws.send_str(json.dumps({"id": self._id, "method": method, "params": params or {}}))
        reply = await asyncio.wait_for(fut, 60)
        if "error" in reply:
            raise RuntimeError(f"CDP {method}: {reply['error']}")
        return reply.get("result", {})

    def send(self, method: str, params: Optional[dict] = None) -> dict:
        return self.browser.loop.run_until_complete(self._send(method, params))

    def navigate(self, url: str, timeout: float = 30) -> None:
        n = len(self.events)
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        while not any(e["method"] == "Page.loadEventFired" for e in self.events[n:]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not finish loading in {timeout}s")
            self.browser.loop.run_until_complete(asyncio.sleep(0.05))

    def evaluate(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def screenshot(self, path: Path) -> Path:
        """The whole page (not just the viewport), as PNG."""
        metrics = self.send("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = self.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 16000), "scale": 1},
            },
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


class Browser:
    def __init__(self, profile: Path):
        exe = chromium_path()
        if exe is None:
            pytest.fail(
                "no Chromium found: run scripts/setup.sh (it installs Debian's `chromium` package) "
                "or point SCIGA_CHROMIUM at a Chromium binary."
            )
        import aiohttp

        self.loop = None
        self.session = None
        self.profile = profile
        self.proc = subprocess.Popen(
            [
                exe,
                *FLAGS,
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
                "--window-size=1280,1600",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                pytest.fail(
                    f"Chromium did not start ({exe}); run it by hand with the flags in tests/browser_fixtures.py"
                )
            time.sleep(0.05)
        self.port = int(port_file.read_text().splitlines()[0])
        self.loop = asyncio.new_event_loop()
        self.pages: list[Page] = []

        async def session():
            return aiohttp.ClientSession()

        self.session = self.loop.run_until_complete(session())

    def new_page(self) -> Page:
        async def go():
            async with self.session.get(f"http://127.0.0.1:{self.port}/json/list") as r:
                targets = await r.json()
            page = next(t for t in targets if t.get("type") == "page")
            ws = await self.session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
            return ws

        ws = self.loop.run_until_complete(go())
        p = Page(self, ws)
        self.pages.append(p)
        p.send("Page.enable")
        p.send("Network.enable")
        p.send("Runtime.enable")
        return p

    def close(self) -> None:
        if self.session is not None:
            for p in self.pages:
                p._reader.cancel()
                self.loop.run_until_complete(p.ws.close())
            self.loop.run_until_complete(self.session.close())
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.loop is not None:
            self.loop.close()


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path / "chromium-profile")
    yield b
    b.close()
