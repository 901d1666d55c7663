"""Claude Code (`@anthropic-ai/claude-code` from npm) for the tests: installed once into a
cache folder, run as `claude -p` with HOME in a scratch folder against a local base URL, and
a recorder that keeps what it POSTs to /v1/messages.

    binary = claude_binary()            # installs on first use; None (and why) when it cannot
    run_claude(binary, "http://127.0.0.1:PORT", "Say hello", tmp_path)

Re-record the fixture tests/sidecar/recorded/ replays (after a Claude Code release; this
installs the newest release first, and the tests then run that version):

    .venv/bin/python -m tests.sidecar.claude_code record

COLI_NPM_CACHE: where the package is installed (default ~/.cache/colibri/npm);
scripts/test.sh installs it there (ensure_claude_code).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PACKAGE = "@anthropic-ai/claude-code"
RECORDED = Path(__file__).resolve().parent / "recorded"
RECORD_PROMPT = "Say hello"
TRANSPORT_HEADERS = ("host", "content-length", "connection", "accept-encoding")  # the HTTP client's, not Claude Code's
RECORDING = re.compile(r"claude-code-(\d+\.\d+\.\d+)-messages\.json$")  # a recording's name: its version


def npm_prefix() -> Path:
    return Path(os.environ.get("COLI_NPM_CACHE") or Path.home() / ".cache" / "colibri" / "npm")


def installed_binary() -> Path | None:
    path = npm_prefix() / "node_modules" / ".bin" / "claude"
    return path if path.exists() else None


def recorded_version() -> str | None:
    """The Claude Code version of the newest recording: the one the tests run."""
    path = latest_recording()
    m = RECORDING.search(path.name) if path else None
    return m.group(1) if m else None


def claude_binary(install: bool = True, release: str | None = None) -> tuple[Path | None, str]:
    """(the `claude` executable, "") or (None, why not). npm installs the package into
    npm_prefix() when none is there, or when `release` ("2.1.332", "latest") is given and
    the installed one is another; the first time, at the recorded version."""
    found = installed_binary()
    if found is not None and (release is None or version(found) == release):
        return found, ""
    if not install:
        return None, f"{PACKAGE}{'@' + release if release else ''} is not installed in {npm_prefix()}"
    spec = f"{PACKAGE}@{release or recorded_version() or 'latest'}"
    npm = shutil.which("npm")
    if npm is None:
        return None, "npm is not installed (Node.js is needed to install Claude Code)"
    npm_prefix().mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([npm, "install", "--prefix", str(npm_prefix()), "--no-audit", "--no-fund",
                               "--loglevel=error", spec], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, f"npm install {spec} did not finish in 10 minutes"
    found = installed_binary()
    if done.returncode != 0 or found is None:
        return None, f"npm could not install {spec}: {(done.stderr or done.stdout).strip()[-500:]}"
    return found, ""


def version(binary: Path) -> str:
    """'2.1.332' from `claude --version`."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"\d+\.\d+\.\d+", out)
    return m.group(0) if m else "unknown"


def claude_env(base_url: str, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a local `claude -p`: its own HOME, the local server, a dummy key,
    no telemetry, update checks or other calls home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update(HOME=str(home), ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="dummy",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", **extra)
    return env


def run_claude(binary: Path, base_url: str, prompt: str, scratch: Path, timeout: float = 600,
               **env: str) -> subprocess.CompletedProcess:
    """`claude -p PROMPT` in scratch/project with HOME at scratch/home."""
    home, project = scratch / "home", scratch / "project"
    home.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    return subprocess.run([str(binary), "-p", prompt], cwd=project, env=claude_env(base_url, home, **env),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


class Recorder:
    """A stand-in for the Messages API on a local port: keeps each request (path, headers,
    JSON body) and answers a one-word message, as a stream when asked for one."""

    def __init__(self):
        self.requests: list[dict] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                body = json.loads(raw) if raw else None
                recorder.requests.append({"method": "POST", "path": self.path, "headers": dict(self.headers.items()),
                                          "body": body})
                data, kind = Recorder.reply(body or {})
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @staticmethod
    def reply(body: dict) -> tuple[bytes, str]:
        msg = {"id": "msg_recorder", "type": "message", "role": "assistant", "model": body.get("model"),
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 1, "output_tokens": 0}}
        if not body.get("stream"):
            msg.update(content=[{"type": "text", "text": "hello"}], stop_reason="end_turn")
            return json.dumps(msg).encode(), "application/json"
        events = [("message_start", {"message": msg}),
                  ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
                  ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "hello"}}),
                  ("content_block_stop", {"index": 0}),
                  ("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                     "usage": {"output_tokens": 1}}),
                  ("message_stop", {})]
        text = "".join(f"event: {name}\ndata: {json.dumps({'type': name, **payload})}\n\n" for name, payload in events)
        return text.encode(), "text/event-stream"

    def __enter__(self) -> "Recorder":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def record(out_dir: Path = RECORDED) -> Path:
    """Run the newest Claude Code release once against a Recorder and store its first
    /v1/messages request as recorded/claude-code-<version>-messages.json."""
    binary, why = claude_binary(release="latest")
    if binary is None:
        raise SystemExit(why)
    ver = version(binary)
    with tempfile.TemporaryDirectory(prefix="claude-code-record-") as scratch, Recorder() as rec:
        done = run_claude(binary, rec.base, RECORD_PROMPT, Path(scratch), timeout=300)
    posts = [r for r in rec.requests if r["path"].split("?")[0] == "/v1/messages"]
    if done.returncode != 0 or not posts:
        raise SystemExit(f"claude -p failed ({done.returncode}): {done.stderr or done.stdout}")
    first = posts[0]
    fixture = {
        "client": f"{PACKAGE}@{ver}",
        "recorded_with": f"claude -p {json.dumps(RECORD_PROMPT)} (HOME in a scratch folder, ANTHROPIC_BASE_URL at "
                         "a recorder, ANTHROPIC_API_KEY=dummy, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1)",
        "method": first["method"], "path": first["path"],
        "headers": {k: v for k, v in first["headers"].items() if k.lower() not in TRANSPORT_HEADERS},
        "body": first["body"],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"claude-code-{ver}-messages.json"
    path.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    return path


def latest_recording() -> Path | None:
    """The fixture of the newest Claude Code version recorded."""
    def key(p: Path) -> tuple[int, ...]:
        m = RECORDING.search(p.name)
        return tuple(int(x) for x in m.group(1).split(".")) if m else (0,)

    found = sorted(RECORDED.glob("claude-code-*-messages.json"), key=key)
    return found[-1] if found else None


if __name__ == "__main__":
    if sys.argv[1:] != ["record"]:
        raise SystemExit("usage: python -m tests.sidecar.claude_code record")
    print(record())
