"""Helpers for the `coli serve --upstream` tests: plain HTTP to a server, and FakeUpstream, a stand-in
for a remote engine that misbehaves on cue.

    plan = ["500", "ok"]                              # what the next chat requests get, shared by the fakes
    with FakeUpstream("engine", plan) as up:          # an aiohttp server on its own loop, on a free port
        with ServerProcess(["--upstream", up.url]) as gw: ...

FakeUpstream stands for what a real engine will not do on demand (answer a 500 while healthy, hang, die
mid-stream); the gateway in front of it is the real `coli serve`.
"""
from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading

from aiohttp import web


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connection(url: str, timeout: float = 60) -> http.client.HTTPConnection:
    host, port = url[len("http://"):].rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=timeout)


def get(url: str, path: str) -> tuple[int, bytes]:
    conn = connection(url, 5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def post(url: str, path: str, payload: dict, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """(status, lower-cased headers, body); a body cut short (the server closed the socket) is what arrived."""
    conn = connection(url)
    try:
        conn.request("POST", path, json.dumps(payload), {"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        try:
            body = resp.read()
        except http.client.IncompleteRead as exc:
            body = exc.partial
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
    finally:
        conn.close()


ACTIONS = ("ok", "400", "500", "503", "hang", "stall", "cut", "die", "drop")


class FakeUpstream:
    """OpenAI's chat API (JSON and SSE, two chunks a reply) on 127.0.0.1, with GET /health and /v1/models.
    Each chat request takes the next action of `plan` (a list, shared by several fakes; "ok" once empty):
    ok; 400 or 500 or 503 (an error object); hang (never answers); stall (two chunks, then silence);
    cut (two chunks, then the socket closes); die (two chunks, then the whole server goes away); drop (a stream's
    headers, then the socket closes before any chunk: llama-server killed during a prefill)."""

    def __init__(self, model: str, plan: list[str] | None = None, port: int | None = None):
        self.model = model
        self.plan = plan if plan is not None else []
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.seen: list[dict] = []
        self.runner: web.AppRunner | None = None
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def __enter__(self) -> "FakeUpstream":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)

    def start(self) -> "FakeUpstream":
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    def stop(self) -> None:
        """Gone: the port refuses connections, those open are closed."""
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(10)

    async def _start(self) -> None:
        self.released = asyncio.Event()  # set when it stops: what hangs lets go, so no handler outlives the fake
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.chat)
        self.runner = web.AppRunner(app, shutdown_timeout=0.2)  # hanging handlers are cut at once
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def _stop(self) -> None:
        if self.runner is not None:
            runner, self.runner = self.runner, None
            self.released.set()
            await runner.cleanup()

    async def health(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def models(self, _: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model}]})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.seen.append(body)
        action = self.plan.pop(0) if self.plan else "ok"
        assert action in ACTIONS, action
        if action in ("400", "500", "503"):
            return web.json_response({"error": {"message": f"scripted {action}", "type": "server_error",
                                                "code": f"scripted_{action}"}}, status=int(action))
        if action == "hang":
            await self.released.wait()
        usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
        head = {"id": "chatcmpl-1", "created": 1764700000, "model": self.model}
        if not body.get("stream"):
            return web.json_response({**head, "object": "chat.completion", "usage": usage, "choices": [{
                "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi there"}}]})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if action == "drop":
            await resp.write(b": prefill\n\n")  # the headers (and a comment) out, no chunk
            request.transport.close()
            return resp
        pieces = [({"role": "assistant", "content": "Hi"}, None), ({"content": " there"}, None)]
        if action == "ok":
            pieces[-1] = ({"content": " there"}, "stop")
        for delta, finish in pieces:
            chunk = {**head, "object": "chat.completion.chunk",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        if action == "stall":
            await self.released.wait()
        if action in ("cut", "die"):
            request.transport.close()
            if action == "die":
                asyncio.get_running_loop().create_task(self._stop())
            return resp
        await resp.write(b"data: " + json.dumps({**head, "object": "chat.completion.chunk", "choices": [],
                                                 "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")
        return resp
