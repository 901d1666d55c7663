"""`coli chat`: a conversation in the terminal, streamed token by token.

The same serving path as `coli serve` answers it: with `--url` a running server,
otherwise the model loaded in this process behind a private server on a free
loopback port (colibri.server's app: the chat template, reasoning and stops,
slots and their caches all as a client of the API would get them). The
terminal side is the standard library's: input() with readline's line editing
and history, http.client for the stream.

    ChatSession(client).repl()     # until Ctrl+D or /exit
"""
from __future__ import annotations

import asyncio
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, TextIO

from colibri.errors import ColiError

HELP = """\
Enter sends. A line ending in \\ continues on the next line; a line of three quotes (\"\"\")
opens a block that runs to the next such line (for pasting). Ctrl+C stops a reply,
Ctrl+D or /exit leaves.
  /reset        forget the conversation (a new one starts)
  /slot N       run on KV slot N (each slot keeps its own cached conversation); /slot auto
  /save [FILE]  write the conversation as JSON (default coli-chat-<time>.json)
  /system TEXT  set the system message (and start again)
  /help         this text"""

FENCE = '"""'


class ChatError(ColiError):
    exit_code = 1


# ---- the API client ----------------------------------------------------------------

@dataclass
class Reply:
    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    usage: dict = field(default_factory=dict)
    first_token_s: float | None = None  # seconds from the request to the first streamed text
    elapsed_s: float = 0.0
    stopped: bool = False  # Ctrl+C cut it short

    @property
    def tokens(self) -> int:
        return int(self.usage.get("completion_tokens") or 0)

    @property
    def tok_per_s(self) -> float:
        """Generated tokens per second after the first (the decode rate)."""
        if self.first_token_s is None or self.tokens < 2:
            return 0.0
        span = self.elapsed_s - self.first_token_s
        return (self.tokens - 1) / span if span > 0 else 0.0


class Client:
    """POST /v1/chat/completions with stream=true, one connection per reply."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 600):
        parsed = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ChatError(f"--url must be an http(s) address like http://127.0.0.1:8000, got {url!r}")
        self.scheme, self.host, self.port = parsed.scheme, parsed.hostname, parsed.port
        self.prefix = parsed.path.rstrip("/")
        if self.prefix.endswith("/v1"):
            self.prefix = self.prefix[:-3]
        self.api_key, self.timeout = api_key, timeout
        self.url = f"{parsed.scheme}://{parsed.netloc}{self.prefix}"

    def _connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def get(self, path: str) -> dict:
        conn = self._connection()
        try:
            conn.request("GET", self.prefix + path, headers=self._headers())
            resp = conn.getresponse()
            body = resp.read()
        except OSError as exc:
            raise ChatError(f"cannot reach {self.url}: {exc}") from exc
        finally:
            conn.close()
        if resp.status != 200:
            raise ChatError(f"{self.url}{path} answered {resp.status}: {_error_text(body)}")
        return json.loads(body)

    def stream(self, body: dict, on_delta: Callable[[str, str], None]) -> Reply:
        """Send the request and call on_delta(kind, text) for each piece ("reasoning" or "content").
        KeyboardInterrupt closes the connection (the server stops generating) and returns what came."""
        reply = Reply()
        t0 = time.perf_counter()
        conn = self._connection()
        try:
            conn.request("POST", self.prefix + "/v1/chat/completions",
                         body=json.dumps({**body, "stream": True, "stream_options": {"include_usage": True}}),
                         headers=self._headers())
            resp = conn.getresponse()
            if resp.status != 200:
                raise ChatError(f"the server answered {resp.status}: {_error_text(resp.read())}")
            for event in _sse(resp):
                if event.get("usage"):
                    reply.usage = event["usage"]
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    for kind, key in (("reasoning", "reasoning_content"), ("content", "content")):
                        text = delta.get(key)
                        if text:
                            if reply.first_token_s is None:
                                reply.first_token_s = time.perf_counter() - t0
                            setattr(reply, kind, getattr(reply, kind) + text)
                            on_delta(kind, text)
                    if choice.get("finish_reason"):
                        reply.finish_reason = choice["finish_reason"]
        except KeyboardInterrupt:
            reply.stopped = True
        except OSError as exc:
            raise ChatError(f"the connection to {self.url} failed: {exc}") from exc
        finally:
            conn.close()
            reply.elapsed_s = time.perf_counter() - t0
        if reply.stopped and not reply.usage:
            reply.usage = {"completion_tokens": None}
        return reply


def _sse(resp: http.client.HTTPResponse) -> Iterator[dict]:
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        data = line[len("data: "):]
        if data == "[DONE]":
            return
        event = json.loads(data)
        if "error" in event:
            raise ChatError(f"the server failed mid-reply: {_error_text(data.encode())}")
        yield event


def _error_text(body: bytes) -> str:
    try:
        err = json.loads(body).get("error")
        return err.get("message") if isinstance(err, dict) else str(err)
    except (ValueError, AttributeError):
        return body.decode("utf-8", "replace").strip()[:300]


# ---- the model in this process -----------------------------------------------------

class LocalServer:
    """The API on a free loopback port, served from a thread of this process with the model loaded here."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.url = ""
        self.model_id = ""
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="coli-chat-server", daemon=True)

    def start(self) -> "LocalServer":
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        from aiohttp import web

        from colibri.api import connections
        from colibri.server import create_app
        from colibri.serving.model import close_model, load_model

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        served = await self._loop.run_in_executor(None, load_model, self.cfg)
        try:
            app = create_app(self.cfg, served)
            runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=5)
            await runner.setup()
            try:
                site = connections.GatedSite(runner, app[connections.gate_key], "127.0.0.1", 0)
                await site.start()
                self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
                self.model_id = served.model_id
                self._ready.set()
                await self._stop.wait()
            finally:
                await runner.cleanup()
        finally:
            await close_model(served)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(30)


# ---- the conversation ----------------------------------------------------------------

DIM, BOLD, RESET, CLEAR_LINE = "\033[2m", "\033[1m", "\033[0m", "\033[K"


class ChatSession:
    def __init__(self, client: Client, model: str, *, max_tokens: int, temperature: float | None,
                 system: str | None = None, show_reasoning: bool = False, kv_slots: int | None = None,
                 out: TextIO = sys.stdout, color: bool | None = None):
        self.client, self.model = client, model
        self.max_tokens, self.temperature = max_tokens, temperature
        self.system = system
        self.show_reasoning = show_reasoning
        self.kv_slots = kv_slots
        self.slot: int | None = None
        self.messages: list[dict] = []
        self.out = out
        self.color = out.isatty() and not os.environ.get("NO_COLOR") if color is None else color
        self.reset()

    # -- output
    def say(self, text: str = "", end: str = "\n") -> None:
        self.out.write(text + end)
        self.out.flush()

    def dim(self, text: str) -> str:
        return f"{DIM}{text}{RESET}" if self.color else text

    # -- commands
    def reset(self) -> None:
        self.messages = [{"role": "system", "content": self.system}] if self.system else []

    def command(self, line: str) -> bool:
        """Run a /command; False when the session should end."""
        name, _, arg = line[1:].strip().partition(" ")
        arg = arg.strip()
        if name in ("exit", "quit", "bye"):
            return False
        if name == "reset":
            self.reset()
            self.say(self.dim("[conversation cleared]"))
        elif name == "slot":
            self.set_slot(arg)
        elif name == "save":
            self.save(arg)
        elif name == "system":
            self.system = arg or None
            self.reset()
            self.say(self.dim("[system message set; conversation cleared]" if arg else "[system message removed]"))
        elif name in ("help", "?"):
            self.say(HELP)
        else:
            self.say(f"unknown command /{name}; /help lists them")
        return True

    def set_slot(self, arg: str) -> None:
        if arg in ("", "auto"):
            self.slot = None
            self.say(self.dim("[slot: chosen by the server]"))
            return
        try:
            slot = int(arg)
        except ValueError:
            self.say(f"/slot takes a number 0-{(self.kv_slots or 1) - 1} or 'auto', got {arg!r}")
            return
        if self.kv_slots is not None and not 0 <= slot < self.kv_slots:
            self.say(f"no slot {slot}: the server has {self.kv_slots} (0-{self.kv_slots - 1}; --kv-slots for more)")
            return
        self.slot = slot
        self.say(self.dim(f"[slot {slot}]"))

    def save(self, arg: str) -> None:
        path = Path(arg).expanduser() if arg else Path(f"coli-chat-{time.strftime('%Y%m%d-%H%M%S')}.json")
        data = {"model": self.model, "messages": self.messages}
        try:
            path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:
            self.say(f"cannot save to {path}: {exc.strerror or exc}")
            return
        self.say(self.dim(f"[saved {len(self.messages)} messages to {path}]"))

    # -- one turn
    def ask(self, text: str) -> Reply:
        self.messages.append({"role": "user", "content": text})
        body: dict = {"model": self.model, "messages": self.messages, "max_tokens": self.max_tokens}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.slot is not None:
            body["cache_slot"] = self.slot
        fold = _Fold(self)
        try:
            reply = self.client.stream(body, fold.delta)
        except ChatError:
            self.messages.pop()
            fold.end()
            raise
        fold.end()
        if reply.stopped and not reply.content and not reply.reasoning:
            self.messages.pop()  # stopped before a word: as if it had not been asked
            self.say(self.dim(self.stats(reply)))
            return reply
        message = {"role": "assistant", "content": reply.content}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        self.messages.append(message)
        self.say(self.dim(self.stats(reply)))
        return reply

    def stats(self, reply: Reply) -> str:
        parts = []
        if reply.stopped:
            parts.append("stopped")
        if reply.tokens:
            parts.append(f"{reply.tokens} token{'s' if reply.tokens != 1 else ''}")
            parts.append(f"{reply.tok_per_s:.1f} tok/s")
        if reply.first_token_s is not None:
            parts.append(f"first token {reply.first_token_s:.2f} s")
        if reply.usage.get("prompt_tokens"):
            parts.append(f"{reply.usage['prompt_tokens']} prompt tokens")
        if reply.finish_reason == "length":
            parts.append("hit --max-tokens")
        return "[" + ", ".join(parts or ["no reply"]) + "]"

    # -- the loop
    def read(self, prompt: str = ">>> ") -> str | None:
        """One message from the terminal (None at Ctrl+D): `\\` continues a line, \"\"\" fences a block."""
        lines: list[str] = []
        fenced = False
        while True:
            line = input(prompt if not lines and not fenced else "... ")
            if fenced:
                if line.strip() == FENCE:
                    return "\n".join(lines)
                lines.append(line)
            elif not lines and line.strip() == FENCE:
                fenced = True
            elif line.endswith("\\"):
                lines.append(line[:-1])
            else:
                lines.append(line)
                return "\n".join(lines)

    def repl(self) -> int:
        try:
            import readline  # noqa: F401 - line editing and history for input()
        except ImportError:
            pass
        self.say(self.dim(f"chatting with {self.model} at {self.client.url} — /help for commands, Ctrl+D leaves"))
        while True:
            try:
                text = self.read()
            except EOFError:
                self.say()
                return 0
            except KeyboardInterrupt:
                self.say()
                self.say(self.dim("(Ctrl+D or /exit leaves)"))
                continue
            if not text.strip():
                continue
            if text.startswith("/") and "\n" not in text:
                if not self.command(text):
                    return 0
                continue
            try:
                self.ask(text)
            except ChatError as exc:
                self.say(f"error: {exc}")


class _Fold:
    """Shows a reply as it streams: its reasoning folded into one dim line that updates
    (in full, dim, with --show-reasoning), then the answer."""

    def __init__(self, session: ChatSession):
        self.s = session
        self.reasoning = ""
        self.in_reasoning = False
        self.any_content = False
        self.t0 = time.perf_counter()

    def delta(self, kind: str, text: str) -> None:
        s = self.s
        if kind == "reasoning":
            self.reasoning += text
            if s.show_reasoning:
                s.say(s.dim(text), end="")
            elif s.color:
                tail = " ".join(self.reasoning.split())[-60:]
                s.say(f"\r{DIM}thinking… {tail}{RESET}{CLEAR_LINE}", end="")
            elif not self.in_reasoning:
                s.say("thinking…", end="")
            self.in_reasoning = True
            return
        if self.in_reasoning:
            self.close_reasoning()
        self.any_content = True
        s.say(text, end="")

    def close_reasoning(self) -> None:
        s = self.s
        words = len(self.reasoning.split())
        note = f"[thought for {time.perf_counter() - self.t0:.1f} s, {words} words]"
        if s.show_reasoning:  # the reasoning in full above; the note on a line of its own
            s.say("\n" + s.dim(note))
        elif s.color:  # the one updating line becomes the note
            s.say("\r" + CLEAR_LINE + s.dim(note))
        else:  # "thinking… [thought for ...]"
            s.say(" " + note)
        self.in_reasoning = False

    def end(self) -> None:
        if self.in_reasoning:
            self.close_reasoning()
        if self.any_content:
            self.s.say("")
