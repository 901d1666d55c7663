"""A real headless Chromium against a real `coli serve` (the default model): a page of another
site tries every request a browser sends without asking — a `fetch` with text/plain, one
with a typeless Blob, a JSON `fetch` (preflighted), a form post, an <img> on the feeds —
and nothing runs; the server's own page (the dashboard's origin) is served.

Chromium is Debian's (scripts/test.sh installs it and sets COLI_REQUIRE_CHROMIUM=1, so there
a missing browser fails instead of skipping)."""
from __future__ import annotations

import asyncio
import json
import os

import pytest
from aiohttp import web

from tests.sidecar.chromium import Chromium, chromium_path
from tests.sidecar.serve_support import ServerProcess

MODEL = "gemma-3-270m"
BODY = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}

# Every request goes to TARGET; each settles (an opaque reply, a network error, an image
# error) before the page says "done". A foreign page reads nothing back: what the server
# answered is read from DevTools.
ATTACKS = """
(async () => {
  const T = %(target)s, body = %(body)s, settle = p => p.then(() => "ok", e => "refused: " + e);
  const out = {};
  out.text_plain = await settle(fetch(T + "/v1/chat/completions", {method: "POST", mode: "no-cors",
                                      headers: {"Content-Type": "text/plain"}, body}));
  out.blob = await settle(fetch(T + "/v1/completions", {method: "POST", mode: "no-cors",
                                body: new Blob([body.replace('"messages":[{"role":"user","content":"hi"}]', '"prompt":"hi"')])}));
  out.json_cors = await settle(fetch(T + "/v1/chat/completions", {method: "POST",
                                     headers: {"Content-Type": "application/json"}, body}));
  out.form = await new Promise(resolve => {
    const frame = document.createElement("iframe");
    frame.name = "sink";
    frame.onload = () => resolve("loaded");
    document.body.appendChild(frame);
    const form = document.createElement("form");
    form.method = "POST"; form.action = T + "/v1/messages"; form.target = "sink"; form.enctype = "text/plain";
    const input = document.createElement("input");   // the classic JSON-in-a-form body: name=value
    input.name = body.slice(0, -1) + ', "x": "'; input.value = '"}';
    form.appendChild(input); document.body.appendChild(form); form.submit();
  });
  for (const path of ["/experts", "/profile", "/v1/models", "/health"]) {
    out["img " + path] = await new Promise(resolve => {
      const img = new Image();
      img.onload = () => resolve("loaded"); img.onerror = () => resolve("error");
      img.src = T + path;
    });
  }
  return out;
})()
"""


@pytest.fixture(scope="module")
def browser_ok():
    if chromium_path() is None:
        message = "Chromium is not installed (apt-get install chromium; scripts/test.sh does it)"
        if os.environ.get("COLI_REQUIRE_CHROMIUM") == "1":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def server(browser_ok):
    with ServerProcess(["-v", "--kv-slots", "1", "--ctx", "256", "--no-kv-persist", "--threads", "2"]) as srv:
        yield srv


def admitted(srv: ServerProcess) -> int:
    status, _, raw = srv.get("/health")
    return json.loads(raw)["scheduler"]["admitted"]


async def foreign_site() -> tuple[web.AppRunner, int]:
    """A page on another site: http://localhost:PORT/ (the server is http://127.0.0.1:...)."""
    app = web.Application()
    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<!doctype html><title>elsewhere</title><body></body>", content_type="text/html")

    app.router.add_get("/", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, runner.addresses[0][1]


def test_a_page_of_another_site_runs_nothing(server):
    before = admitted(server)

    async def main():
        runner, port = await foreign_site()
        try:
            async with Chromium() as browser:
                page = await browser.page()
                await page.goto(f"http://localhost:{port}/")
                script = ATTACKS % {"target": json.dumps(server.base), "body": json.dumps(json.dumps(BODY, separators=(",", ":")))}
                outcome = await page.evaluate(script)
                await asyncio.sleep(0.5)  # the last DevTools events
                return outcome, [r for r in page.responses if r["url"].startswith(server.base)]
        finally:
            await runner.cleanup()

    outcome, seen = asyncio.run(asyncio.wait_for(main(), 120))
    assert outcome["json_cors"].startswith("refused"), outcome  # the preflight was refused
    assert outcome["form"] == "loaded" and all(outcome[f"img {p}"] == "error" for p in
                                               ("/experts", "/profile", "/v1/models", "/health")), outcome
    # each request reached the server and was refused there, before any work: the server's
    # access log says so (an <img> of a JSON reply is blocked by the browser as well, so only
    # the server knows what it answered)
    for method, path in [("POST", "/v1/chat/completions"), ("POST", "/v1/completions"), ("POST", "/v1/messages"),
                         ("OPTIONS", "/v1/chat/completions"), ("GET", "/experts"), ("GET", "/profile"),
                         ("GET", "/v1/models"), ("GET", "/health")]:
        answers = [line for line in server.output().splitlines() 
                   if f'"{method} {path} HTTP/1.1"' in line and "HeadlessChrome" in line]
        assert answers and all(f'HTTP/1.1" 403 ' in line for line in answers), (method, path, answers)
    sent = {r["url"][len(server.base):]: r.get("headers", {}) for r in seen}
    assert sent["/experts"]["sec-fetch-site"] == "cross-site" and "origin" not in sent["/experts"]
    assert sent["/v1/completions"]["origin"].startswith("http://localhost:")
    assert admitted(server) == before  # no generation ran


def test_the_servers_own_page_is_served(server):
    """The dashboard's origin (the server itself, on whatever port it got): a JSON fetch, a
    feed and a stream run."""
    before = admitted(server)

    async def main():
        async with Chromium() as browser:
            page = await browser.page()
            await page.goto(server.base + "/")
            return await page.evaluate("""(async () => {
              const body = %s;
              const chat = await fetch("/v1/chat/completions", {method: "POST",
                                       headers: {"Content-Type": "application/json"}, body});
              const experts = await fetch("/experts");
              const stream = await fetch("/v1/chat/completions", {method: "POST",
                                         headers: {"Content-Type": "application/json"},
                                         body: body.replace('"max_tokens":1', '"max_tokens":2,"stream":true')});
              const text = await stream.text();
              return {chat: chat.status, reply: (await chat.json()).object, experts: experts.status,
                      stream: stream.status, done: text.includes("[DONE]")};
            })()""" % json.dumps(json.dumps(BODY, separators=(",", ":"))))

    out = asyncio.run(asyncio.wait_for(main(), 120))
    assert out == {"chat": 200, "reply": "chat.completion", "experts": 200, "stream": 200, "done": True}
    assert admitted(server) == before + 2
