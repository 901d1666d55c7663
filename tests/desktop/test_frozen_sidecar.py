"""The PyInstaller build (packaging/build_sidecar.sh) on its own: it assembles the model it
carries, serves /health, a chat request and the dashboard it carries, behind its API key."""
from __future__ import annotations

import http.client
import json
import signal
import subprocess

from tests.desktop.conftest import SIDECAR, Output, require
from tests.sidecar.serve_support import URL_LINE

KEY = "frozen-test-key"


def _request(base: str, method: str, path: str, body: dict | None = None, key: str | None = KEY):
    host, port = base[len("http://"):].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, resp.getheader("content-type", ""), data


def test_the_frozen_sidecar_serves_health_chat_and_the_dashboard(tmp_path):
    exe = require(SIDECAR, "the frozen sidecar")
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and "engine: not loaded" not in version.stdout, version.stdout + version.stderr
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLI_API_KEY": KEY,
           # a fresh data folder: the model is assembled from the packages inside the build
           "COLI_DATA_DIR": str(tmp_path / "data"), "COLI_STATE_DIR": str(tmp_path / "state"),
           "COLI_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([str(exe), "serve", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    out = Output(proc)
    try:
        line = out.wait_for(URL_LINE.search, 300)
        assert line, out.text()
        model, base = URL_LINE.search(line).groups()
        assert model == "gemma-3-270m"
        status, _, body = _request(base, "GET", "/health")
        assert status == 200 and json.loads(body)["status"] == "ok" and json.loads(body)["model"] == model
        chat = {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8,
                "temperature": 0}
        status, _, body = _request(base, "POST", "/v1/chat/completions", chat)
        assert status == 200, body
        reply = json.loads(body)
        assert reply["choices"][0]["message"]["content"].strip() and reply["usage"]["completion_tokens"] > 0
        assert _request(base, "POST", "/v1/chat/completions", chat, key=None)[0] == 401
        status, ctype, body = _request(base, "GET", "/", key=None)
        assert status == 200 and ctype.startswith("text/html") and b'id="root"' in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, out.text()
    finally:
        proc.kill()
