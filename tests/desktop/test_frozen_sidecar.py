"""The PyInstaller build (packaging/build_sidecar.sh) on its own: it chats out of the box with the
instruct model it carries (read in place, offline), serves /health and the dashboard it carries behind
its API key, and pulls from the Hugging Face Hub (huggingface_hub is frozen in)."""
from __future__ import annotations

import http.client
import json
import signal
import subprocess
from pathlib import Path

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
           # a fresh data folder and no network: the model is read from inside the build
           "COLI_DATA_DIR": str(tmp_path / "data"), "COLI_STATE_DIR": str(tmp_path / "state"),
           "COLI_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([str(exe), "serve", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    out = Output(proc)
    try:
        line = out.wait_for(URL_LINE.search, 300)
        assert line, out.text()
        model, base = URL_LINE.search(line).groups()
        assert model == "qwen2.5-coder-0.5b-instruct", out.text()  # the instruct default (rthook_colibri.py)
        status, _, body = _request(base, "GET", "/health")
        assert status == 200 and json.loads(body)["status"] == "ok" and json.loads(body)["model"] == model
        chat = {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8,
                "temperature": 0}
        status, _, body = _request(base, "POST", "/v1/chat/completions", chat)
        assert status == 200, body
        reply = json.loads(body)
        text = reply["choices"][0]["message"]["content"]
        assert reply["usage"]["completion_tokens"] > 0 and any(c.isalpha() for c in text), reply
        assert not list((tmp_path / "data").rglob("*.gguf"))  # nothing copied out of the bundle
        assert _request(base, "POST", "/v1/chat/completions", chat, key=None)[0] == 401
        status, ctype, body = _request(base, "GET", "/", key=None)
        assert status == 200 and ctype.startswith("text/html") and b'id="root"' in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, out.text()
    finally:
        proc.kill()


def test_the_frozen_sidecar_pulls_from_the_hub(tmp_path):
    from tests.engine.tiny_models import write_tiny
    from tests.sidecar.hub_server import HubServer

    exe = require(SIDECAR, "the frozen sidecar")
    gguf = write_tiny(tmp_path / "t.gguf", family="qwen2").read_bytes()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLI_DATA_DIR": str(tmp_path / "data"),
           "COLI_CACHE_DIR": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": "",
           "HF_HUB_DISABLE_TELEMETRY": "1"}
    with HubServer({"org/tiny-GGUF": {"tiny-Q4_K_M.gguf": gguf}}) as hub:
        done = subprocess.run([str(exe), "models", "pull", "org/tiny-GGUF"], capture_output=True, text=True,
                              timeout=120, env={**env, "HF_ENDPOINT": hub.url})
    assert done.returncode == 0, done.stdout + done.stderr
    assert Path(done.stdout.strip().splitlines()[-1]).read_bytes() == gguf
