"""A headless Chromium driven over the DevTools protocol (a WebSocket, aiohttp's client), for
tests that need a real browser's idea of origins, CORS and fetch metadata; no driver package.

    async with Chromium() as browser:
        page = await browser.page()
        await page.goto("http://localhost:8123/")
        value = await page.evaluate("fetch('/x').then(r => r.status)")
        page.responses   # {url: status} of everything the page loaded, opaque replies included

Debian's `chromium` (/usr/bin/chromium or CHROMIUM_PATH), as the dashboard's browser tests use;
scripts/test.sh installs it.
"""
from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import subprocess
import tempfile

import aiohttp


def chromium_path() -> str | None:
    for candidate in (os.environ.get("CHROMIUM_PATH"), "/usr/bin/chromium", "/usr/bin/chromium-browser",
                      shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


class Page:
    def __init__(self, browser: "Chromium", session: str):
        self.browser, self.session = browser, session
        self.requests: dict[str, dict] = {}  # requestId -> {url, method, headers, status, error}
        self._loaded = asyncio.Event()

    async def send(self, method: str, params: dict | None = None) -> dict:
        return await self.browser.send(method, params, self.session)

    def on_event(self, method: str, params: dict) -> None:
        rid = params.get("requestId")
        if method == "Network.requestWillBeSent":
            req = params["request"]
            self.requests.setdefault(rid, {}).update(url=req["url"], method=req["method"])
        elif method == "Network.requestWillBeSentExtraInfo":
            self.requests.setdefault(rid, {})["headers"] = {k.lower(): v for k, v in params["headers"].items()}
        elif method == "Network.responseReceived":
            self.requests.setdefault(rid, {})["status"] = params["response"]["status"]
        elif method == "Network.loadingFailed":
            self.requests.setdefault(rid, {})["error"] = params.get("errorText")
        elif method == "Page.loadEventFired":
            self._loaded.set()

    @property
    def responses(self) -> list[dict]:
        return [r for r in self.requests.values() if "url" in r]

    async def goto(self, url: str, timeout: float = 30) -> None:
        self._loaded.clear()
        await self.send("Page.navigate", {"url": url})
        await asyncio.wait_for(self._loaded.wait(), timeout)

    async def evaluate(self, expression: str):
        """The value of a JavaScript expression, awaited when it is a promise."""
        reply = await self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                     "returnByValue": True})
        if "exceptionDetails" in reply:
            raise RuntimeError(f"the page threw: {reply['exceptionDetails']}")
        return reply["result"].get("value")


class Chromium:
    def __init__(self, timeout: float = 30):
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self._profile = tempfile.mkdtemp(prefix="coli-chromium-")
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}
        self._pages: dict[str, Page] = {}

    async def __aenter__(self) -> "Chromium":
        path = chromium_path()
        assert path, "no chromium"
        self.proc = subprocess.Popen(
            [path, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--remote-debugging-port=0",
             f"--user-data-dir={self._profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = await asyncio.wait_for(asyncio.to_thread(self._devtools_url), self.timeout)
        self._http = aiohttp.ClientSession()
        self._ws = await self._http.ws_connect(url, max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        return self

    def _devtools_url(self) -> str:
        for line in self.proc.stderr:
            if line.startswith("DevTools listening on "):
                threading_drain(self.proc.stderr)
                return line.split(" on ", 1)[1].strip()
        raise RuntimeError("chromium exited before it listened")

    async def __aexit__(self, *exc: object) -> None:
        self._reader.cancel()
        await self._ws.close()
        await self._http.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    async def _read(self) -> None:
        async for msg in self._ws:
            data = msg.json()
            if "id" in data:
                fut = self._waiting.pop(data["id"], None)
                if fut and not fut.done():
                    fut.set_result(data)
            elif data.get("sessionId") in self._pages:
                self._pages[data["sessionId"]].on_event(data["method"], data.get("params", {}))

    async def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        mid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[mid] = fut
        await self._ws.send_json({"id": mid, "method": method, "params": params or {},
                                  **({"sessionId": session} if session else {})})
        reply = await asyncio.wait_for(fut, self.timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    async def page(self) -> Page:
        target = (await self.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
        session = (await self.send("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        page = self._pages[session] = Page(self, session)
        await page.send("Page.enable")
        await page.send("Network.enable")
        return page


def threading_drain(stream) -> None:
    """Keep reading chromium's stderr so it never blocks on a full pipe."""
    import threading

    threading.Thread(target=lambda: [None for _ in stream], daemon=True).start()
