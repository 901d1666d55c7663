"""opencode (npm `opencode-ai`) and aider (PyPI `aider-chat`), coding agents that speak OpenAI's
Chat Completions, for their end-to-end tests (test_opencode_aider.py): where each is installed,
how it is run against a local base URL with no call home, and a recorder of what it sends.

    opencode, why = opencode_binary()      # None (and why) when it is not installed
    run_opencode(opencode, "http://127.0.0.1:PORT/v1", "model-id", "Say hello", project)
    aider, why = aider_binary()
    run_aider(aider, "http://127.0.0.1:PORT/v1", "model-id", "Say hello", project)

Both are installed at the pinned versions below by scripts/test.sh (ensure_opencode into
COLI_NPM_CACHE, default ~/.cache/colibri/npm, beside Claude Code and Codex; ensure_aider into
its own virtual environment, COLI_AIDER_VENV, default ~/.cache/colibri/aider-VERSION: aider pins
its dependencies, which the test environment's cannot share). To move to a newer release, change
the version here and in test.sh, install it, and record its first request again:

    .venv/bin/python -m tests.sidecar.openai_agents record opencode|aider
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.sidecar.claude_code import TRANSPORT_HEADERS, npm_prefix

OPENCODE_VERSION = "1.18.33"
AIDER_VERSION = "0.86.2"
RECORDED = Path(__file__).resolve().parent / "recorded"
RECORD_PROMPT = "Say hello"
RECORD_MODEL = "local-model"  # the name each client is configured with while recorded


def opencode_binary() -> tuple[Path | None, str]:
    path = npm_prefix() / "node_modules" / ".bin" / "opencode"
    if not path.exists():
        return None, (f"opencode is not installed in {npm_prefix()}: scripts/test.sh installs it "
                      f"(npm install --prefix {npm_prefix()} opencode-ai@{OPENCODE_VERSION})")
    return path, ""


def aider_venv() -> Path:
    return Path(os.environ.get("COLI_AIDER_VENV") or Path.home() / ".cache" / "colibri" / f"aider-{AIDER_VERSION}")


def aider_binary() -> tuple[Path | None, str]:
    path = aider_venv() / "bin" / "aider"
    if not path.exists():
        return None, (f"aider is not installed in {aider_venv()}: scripts/test.sh installs it (a virtual "
                      f"environment with pip install aider-chat=={AIDER_VERSION})")
    return path, ""


def _quiet_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a local run: its own HOME (config, caches, history), nothing of the user's
    providers, no update checks, telemetry or catalogue downloads."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "ANTHROPIC_", "OPENCODE_", "AIDER_", "XDG_"))}
    env.update(HOME=str(home), NO_COLOR="1", **extra)
    return env


def opencode_config(base_url: str, model: str, limit: dict | None = None) -> dict:
    """An OpenAI-compatible provider at base_url serving `model`, the way opencode's docs configure
    llama.cpp, LM Studio or Ollama (provider.<id>.npm @ai-sdk/openai-compatible); `limit`: the model's
    {"context", "output"} in tokens (opencode sends max_tokens = output; its default is 32000)."""
    card = {"name": model, **({"limit": limit} if limit else {})}
    return {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
            "model": f"colibri/{model}",
            "provider": {"colibri": {"npm": "@ai-sdk/openai-compatible", "name": "colibri",
                                     "options": {"baseURL": base_url, "apiKey": "local"},
                                     "models": {model: card}}}}


def run_opencode(binary: Path, base_url: str, model: str, prompt: str, scratch: Path, timeout: float = 600,
                 files: tuple[str, ...] = (), limit: dict | None = None) -> subprocess.CompletedProcess:
    """`opencode run PROMPT` in scratch/project, HOME at scratch/home, its config in the environment."""
    home, project = scratch / "home", scratch / "project"
    home.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    env = _quiet_env(home, PWD=str(project), OPENCODE_CONFIG_CONTENT=json.dumps(opencode_config(base_url, model, limit)),
                     OPENCODE_DISABLE_AUTOUPDATE="1", OPENCODE_DISABLE_MODELS_FETCH="1",
                     OPENCODE_DISABLE_LSP_DOWNLOAD="1", OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
                     OPENCODE_DISABLE_SHARE="1", OPENCODE_DISABLE_AUTOCOMPACT="1")
    argv = [str(binary), "run", "--model", f"colibri/{model}", "--format", "json", prompt]
    for f in files:  # relative to the project; after the message, which --file's list would take in
        argv += ["--file", str(project / f)]
    return subprocess.run(argv, cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout)


def run_aider(binary: Path, base_url: str, model: str, prompt: str, scratch: Path, timeout: float = 600,
              files: tuple[str, ...] = (), mode: str | None = None) -> subprocess.CompletedProcess:
    """`aider --message PROMPT FILES` in scratch/project (no git, no commits), HOME at scratch/home, the
    model as `openai/MODEL` at base_url (aider's documented way to an OpenAI-compatible server); `mode`:
    its --chat-mode (default: aider's own, code)."""
    home, project = scratch / "home", scratch / "project"
    home.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    env = _quiet_env(home, OPENAI_API_BASE=base_url, OPENAI_API_KEY="local", LITELLM_LOCAL_MODEL_COST_MAP="True")
    argv = [str(binary), "--model", f"openai/{model}", "--no-git", "--yes-always", "--no-check-update",
            "--no-show-model-warnings", "--analytics-disable", "--no-pretty", "--no-fancy-input",
            "--no-auto-commits", "--no-dirty-commits", *(["--chat-mode", mode] if mode else []),
            "--message", prompt, *files]
    return subprocess.run(argv, cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


class ChatRecorder:
    """A stand-in for an OpenAI-compatible server on a local port: keeps each request (path, headers,
    JSON body) and answers chat completions with one word, as a stream when asked for one."""

    def __init__(self):
        self.requests: list[dict] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _send(self, data: bytes, kind: str, status: int = 200) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                recorder.requests.append({"method": "GET", "path": self.path, "headers": dict(self.headers.items())})
                if self.path.split("?")[0].rstrip("/").endswith("/models"):
                    self._send(json.dumps({"object": "list", "data": [
                        {"id": RECORD_MODEL, "object": "model", "created": 0, "owned_by": "recorder"}]}).encode(),
                        "application/json")
                else:
                    self._send(b'{"error": {"message": "not found"}}', "application/json", 404)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                body = json.loads(raw) if raw else None
                recorder.requests.append({"method": "POST", "path": self.path, "headers": dict(self.headers.items()),
                                          "body": body})
                self._send(*ChatRecorder.reply(body or {}))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @staticmethod
    def reply(body: dict) -> tuple[bytes, str]:
        head = {"id": "chatcmpl-recorder", "created": 0, "model": body.get("model")}
        if not body.get("stream"):
            return json.dumps({**head, "object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode(), "application/json"
        chunks = [{"role": "assistant", "content": ""}, {"content": "hello"}]
        frames = [{**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d,
                                                                          "finish_reason": None}]} for d in chunks]
        frames.append({**head, "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
        text = "".join(f"data: {json.dumps(f)}\n\n" for f in frames) + "data: [DONE]\n\n"
        return text.encode(), "text/event-stream"

    def __enter__(self) -> "ChatRecorder":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def recording(client: str) -> Path:
    version = OPENCODE_VERSION if client == "opencode" else AIDER_VERSION
    return RECORDED / f"{client}-{version}-chat-completions.json"


def record(client: str) -> Path:
    """Run the pinned client once against a ChatRecorder and store its first chat completion
    request as recorded/<client>-<version>-chat-completions.json."""
    binary, why = opencode_binary() if client == "opencode" else aider_binary()
    if binary is None:
        raise SystemExit(why)
    run = run_opencode if client == "opencode" else run_aider
    with tempfile.TemporaryDirectory(prefix=f"{client}-record-") as scratch, ChatRecorder() as rec:
        done = run(binary, rec.base, RECORD_MODEL, RECORD_PROMPT, Path(scratch), timeout=300)
    posts = [r for r in rec.requests if r["method"] == "POST" and r["path"].split("?")[0].endswith("/chat/completions")]
    if not posts:
        raise SystemExit(f"{client} sent no chat completion ({done.returncode}): {done.stderr[-3000:]}"
                         f"{done.stdout[-3000:]}")
    first = posts[-1] if client == "opencode" else posts[0]  # opencode titles the session first
    fixture = {
        "client": f"{client}@{OPENCODE_VERSION if client == 'opencode' else AIDER_VERSION}",
        "recorded_with": f"{'opencode run' if client == 'opencode' else 'aider --message'} "
                         f"{json.dumps(RECORD_PROMPT)}, model {RECORD_MODEL!r} at a recorder (run_{client} above)",
        "requests": [{"method": r["method"], "path": r["path"], "model": (r.get("body") or {}).get("model")}
                     for r in rec.requests],
        "method": first["method"], "path": first["path"],
        "headers": {k: v for k, v in first["headers"].items() if k.lower() not in TRANSPORT_HEADERS},
        "body": first["body"],
    }
    path = recording(client)
    path.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    return path


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "record" or sys.argv[2] not in ("opencode", "aider"):
        raise SystemExit("usage: python -m tests.sidecar.openai_agents record opencode|aider")
    print(record(sys.argv[2]))
