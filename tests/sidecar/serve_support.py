"""Helpers for the `coli serve` tests: a real server in a child process, and plain HTTP.

    with ServerProcess(["--kv-slots", "2"]) as srv:
        status, headers, body = srv.post("/v1/chat/completions", {...})
"""
from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from tests.speed import scaled

URL_LINE = re.compile(r"serving (\S+) at (http://\S+)/v1")


class ServerProcess:
    """`python -m colibri serve --port 0 ...`, waited for until it prints its URL."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, timeout: float = 120,
                 command: list[str] | None = None, cwd: str | os.PathLike | None = None):
        self.args = args
        self.command = command or [sys.executable, "-m", "colibri"]  # e.g. an installed wheel's `coli`
        self.cwd = cwd
        self.env = {**os.environ, **(env or {})}
        self._state_dir = None
        if "COLI_STATE_DIR" not in (env or {}):  # persisted KV slots go to a scratch folder, never the user's
            self._state_dir = tempfile.mkdtemp(prefix="coli-state-")
            self.env["COLI_STATE_DIR"] = self._state_dir
        self.timeout = scaled(timeout)
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []
        self.model_id = self.base = ""

    def __enter__(self) -> "ServerProcess":
        self.proc = subprocess.Popen([*self.command, "serve", "--port", "0", *self.args], cwd=self.cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env)
        ready = threading.Event()

        def pump() -> None:
            for line in self.proc.stdout:
                self.lines.append(line)
                m = URL_LINE.search(line)
                if m and not ready.is_set():
                    self.model_id, self.base = m.group(1), m.group(2)
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(self.timeout) or not self.base:
            self.stop()
            raise RuntimeError("the server did not start:\n" + "".join(self.lines))
        host, port = self.base[len("http://"):].rsplit(":", 1)
        self.host, self.port = host.strip("[]"), int(port)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._state_dir:
            shutil.rmtree(self._state_dir, ignore_errors=True)

    def stop(self, sig: str = "term", timeout: float = 60) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate() if sig == "term" else self.proc.kill()
            try:
                self.proc.wait(scaled(timeout))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def output(self) -> str:
        return "".join(self.lines)

    def connection(self, timeout: float = 120) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=scaled(timeout))

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                timeout: float = 120) -> tuple[int, dict, bytes]:
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def post(self, path: str, payload: object, headers: dict | None = None) -> tuple[int, dict, dict]:
        status, hdrs, raw = self.request("POST", path, json.dumps(payload).encode(),
                                         {"Content-Type": "application/json", **(headers or {})})
        return status, hdrs, (json.loads(raw) if raw and hdrs.get("content-type", "").startswith("application/json")
                              else raw)

    def get(self, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
        return self.request("GET", path, headers=headers)


def sse_events(raw: bytes) -> list:
    """The `data:` payloads of an SSE body, JSON-decoded ("[DONE]" stays a string)."""
    text = raw.decode("utf-8")
    assert text.endswith("\n\n"), text[-200:]
    events = []
    for block in text.split("\n\n")[:-1]:
        assert block.startswith("data: "), block
        data = block[len("data: "):]
        events.append(data if data == "[DONE]" else json.loads(data))
    return events


def named_events(text: str) -> list[tuple[str, dict]]:
    """(name, payload) of each `event:`/`data:` block of a named-event SSE body (Anthropic's),
    checking that every payload's type is its event's name."""
    out = []
    for block in text.split("\n\n")[:-1]:
        name, data = block.split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        payload = json.loads(data[6:])
        assert payload["type"] == name[7:]
        out.append((name[7:], payload))
    return out


def wait_for(predicate, timeout: float = 30, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


# ---- in process: the real engine under aiohttp's test client ---------------------------

def open_served(cfg, model_path):
    """The real model loaded as `coli serve` loads it (engine, engine thread, chat format)."""
    from dataclasses import replace

    from colibri.server import load_model

    return load_model(replace(cfg, model_path=str(model_path)))


def close_served(served) -> None:
    import asyncio

    from colibri.server import close_model

    asyncio.run(close_model(served))
    served.engine.close()


def run_app(served, body, cfg, timeout: float = 120):
    """Run `await body(client, served)` against a fresh app on `served`."""
    import asyncio

    from aiohttp.test_utils import TestClient, TestServer

    from colibri.server import create_app

    async def main():
        async with TestClient(TestServer(create_app(cfg, served))) as client:
            return await body(client, served)

    return asyncio.run(asyncio.wait_for(main(), scaled(timeout)))


def stream_until_the_engine_closes(cfg, model_path, path: str, payload: dict, marker: bytes) -> tuple[int, str]:
    """(status, body text) of a stream whose engine is closed under it once `marker` arrived:
    the socket must then close (a ClientPayloadError)."""
    import asyncio
    from dataclasses import replace

    import aiohttp
    import pytest

    from colibri.server import close_model

    doomed = open_served(replace(cfg, kv_slots=1), model_path)

    async def body(c, served):
        r = await c.post(path, json=payload)
        data = await r.content.readuntil(marker)
        served.engine.close()  # the engine goes away under a running generation
        with pytest.raises(aiohttp.ClientPayloadError):  # then the socket closes
            while chunk := await r.content.readany():
                data += chunk
        return r.status, data.decode()

    try:
        return run_app(doomed, body, cfg)
    finally:
        asyncio.run(close_model(doomed))


class AppThread:
    """The app on a real port, in a thread with its own event loop, for synchronous clients
    (the official SDKs) against an in-process model.

        with AppThread(cfg, served) as base:     # "http://127.0.0.1:PORT"
            OpenAI(base_url=base + "/v1", ...)
    """

    def __init__(self, cfg, served):
        self.cfg, self.served = cfg, served
        self.base = ""
        self._ready = threading.Event()
        self._loop = None
        self._stop = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import asyncio

        from aiohttp import web

        from colibri.server import create_app

        async def main():
            self._stop = asyncio.Event()
            runner = web.AppRunner(create_app(self.cfg, self.served), handler_cancellation=True)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            self.base = f"http://127.0.0.1:{runner.addresses[0][1]}"
            self._loop = asyncio.get_running_loop()
            self._ready.set()
            await self._stop.wait()
            await runner.cleanup()

        asyncio.run(main())

    def __enter__(self) -> str:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the app did not start")
        return self.base

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
