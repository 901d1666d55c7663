"""`coli web`'s moving parts: the server as a child process, the splash, the native window.

    server = ServerChild(serve_argv(args, serve_parser), api_key=key).start()
    reason = gui_unavailable_reason()          # None: a pywebview (Qt) window can open
    code = run_window(server, key) if reason is None else run_browser(server, reason)

The server runs as `coli serve` in a child process, so its output feeds the
splash line by line (model assembly progress included), a crash of the window
toolkit cannot take the server down with it, and stopping it is one SIGTERM.
"""
from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import webbrowser
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

UI_DIR = Path(__file__).with_name("desktop_ui")
ANNOUNCE = re.compile(r"serving (\S+) at (http://\S+)/v1")
WINDOW_TITLE = "colibri"
WINDOW_SIZE = (1280, 840)
STOP_TIMEOUT_S = 40.0  # the server drains in-flight requests (COLI_ENGINE_DRAIN_S, 30 s) before exiting
TAIL_LINES = 20
INSTALL_HINT = "pip install 'colibri[desktop]'"

# Run in a child so a Qt that aborts (a missing libxcb-cursor0, say) cannot take `coli web` with it.
_QT_PROBE = """
from qtpy.QtWidgets import QApplication
from qtpy.QtWebEngineWidgets import QWebEngineView
app = QApplication(["colibri-probe"])
"""


# ---- pure pieces -----------------------------------------------------------------

def splash_html() -> str:
    """desktop_ui/index.html with its stylesheet and script inlined (pywebview loads it as a string;
    the Tauri shell serves the same folder as files)."""
    html = (UI_DIR / "index.html").read_text(encoding="utf-8")
    css = (UI_DIR / "splash.css").read_text(encoding="utf-8")
    js = (UI_DIR / "splash.js").read_text(encoding="utf-8")
    html = html.replace('<link rel="stylesheet" href="splash.css" />', f"<style>\n{css}</style>")
    return html.replace('<script src="splash.js"></script>', f"<script>\n{js}</script>")


def splash_call(function: str, *args: str) -> str:
    """JavaScript that calls colibriSplash.<function> with JSON-escaped arguments (safe for any text)."""
    return f"window.colibriSplash && window.colibriSplash.{function}({', '.join(json.dumps(a) for a in args)})"


def dashboard_url(base: str, api_key: str | None) -> str:
    """The dashboard; a key rides in the fragment, which the page takes and erases (web/src/lib/launchKey.ts)."""
    url = base.rstrip("/") + "/"
    return f"{url}#key={api_key}" if api_key else url


def port_is_free(host: str, port: int) -> bool:
    """True when a server could bind host:port now (SO_REUSEADDR, as aiohttp binds: TIME_WAIT is free)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host.strip("[]"), port))
        except OSError:
            return False
    return True


def serve_argv(args: argparse.Namespace, serve_parser: argparse.ArgumentParser) -> list[str]:
    """The `coli serve` flags that reproduce `args` (only values that differ from the defaults).
    The API key and the upstream key are left out: they travel in the environment, where `ps` cannot read them."""
    argv: list[str] = []
    for action in serve_parser._actions:  # argparse has no public iterator over actions
        if not action.option_strings or action.dest in ("help", "api_key", "upstream_key"):
            continue
        value = getattr(args, action.dest, action.default)
        if value is None or value == action.default:
            continue
        flag = next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])
        if isinstance(action, argparse.BooleanOptionalAction):
            argv.append(flag if value else "--no-" + flag[2:])
        elif isinstance(action, argparse._StoreTrueAction):
            argv.append(flag)
        elif isinstance(action, argparse._CountAction):
            argv += [flag] * int(value)
        elif isinstance(action, argparse._AppendAction):
            for item in value:
                argv += [flag, str(item)]
        else:
            argv += [flag, str(value)]
    return argv


def gui_unavailable_reason(env: dict[str, str] | None = None, probe: bool = True) -> str | None:
    """None when a pywebview window with the Qt backend can open; else why not, in a few words."""
    env = dict(os.environ if env is None else env)
    try:
        import webview  # noqa: F401
    except ImportError:
        return f"pywebview is not installed; {INSTALL_HINT}"
    try:
        import qtpy  # noqa: F401
    except Exception:  # noqa: BLE001 - qtpy raises its own errors when no binding is found
        return f"pywebview's Qt backend is not installed; {INSTALL_HINT}"
    if sys.platform.startswith("linux") and not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        return "no display ($DISPLAY and $WAYLAND_DISPLAY are unset)"
    if not probe:
        return None
    try:
        done = subprocess.run([sys.executable, "-c", _QT_PROBE], env=qt_env(env), capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Qt could not be started ({exc})"
    if done.returncode != 0:
        return f"Qt cannot open a window ({qt_failure_hint(done.stderr) or f'exit code {done.returncode}'})"
    return None


def qt_failure_hint(stderr: str) -> str:
    """The first thing Qt's platform layer complained about ("could not connect to display :1",
    "xcb-cursor0 or libxcb-cursor0 is needed ..."), else its last line."""
    lines = [ln.strip() for ln in (stderr or "").splitlines() if ln.strip()]
    for line in lines:
        m = re.match(r"qt\.qpa\.[\w.]+: (.+)", line)
        if m:
            return m.group(1)
    return lines[-1] if lines else ""


def qt_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """Chromium (inside Qt WebEngine) refuses to run as root with its sandbox on."""
    env = dict(os.environ if env is None else env)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")
    return env


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the server gets SIGTERM if `coli web` itself is killed, rather than living on."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


# ---- the server child ------------------------------------------------------------

class ServerChild:
    """`coli serve ARGV` in a child process; its lines go to `echo` and to `on_line` until it serves."""

    def __init__(self, argv: list[str], api_key: str | None = None, echo: Callable[[str], None] | None = None):
        if getattr(sys, "frozen", False):  # a PyInstaller build: the executable is `coli` itself
            self.command = [sys.executable, "serve", *argv]
        else:
            self.command = [sys.executable, "-m", "colibri", "serve", *argv]
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if api_key:
            self.env["COLI_API_KEY"] = api_key
        self.api_key = api_key
        self.echo = echo or (lambda line: print(line, flush=True))
        self.on_line: Callable[[str], None] | None = None
        self.proc: subprocess.Popen | None = None
        self.model_id = self.base = ""
        self.tail: list[str] = []
        self.ready = threading.Event()  # set when serving, or when it exited first
        self.stopped_on_purpose = False

    def start(self) -> "ServerChild":
        preexec = _die_with_parent if sys.platform.startswith("linux") else None
        self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=self.env, stdin=subprocess.DEVNULL, preexec_fn=preexec)
        threading.Thread(target=self._pump, name="coli-server-output", daemon=True).start()
        return self

    def _pump(self) -> None:
        assert self.proc and self.proc.stdout
        for raw in self.proc.stdout:  # universal newlines: a progress line redrawn with \r is a line too
            line = raw.rstrip()
            if not line:
                continue
            self.echo(line)
            m = ANNOUNCE.search(line)
            if m and not self.ready.is_set():
                self.model_id, self.base = m.group(1), m.group(2)
                self.ready.set()
            elif not self.ready.is_set():
                self.tail = (self.tail + [line])[-TAIL_LINES:]
                if self.on_line:
                    self.on_line(line)
        self.proc.wait()
        self.ready.set()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """True once it serves and /health answers; False when it exited (or timed out) first."""
        if not self.ready.wait(timeout) or not self.base:
            return False
        deadline = time.monotonic() + 30
        while self.running and time.monotonic() < deadline:
            if self.health_ok():
                return True
            time.sleep(0.1)
        return False

    def health_ok(self) -> bool:
        host, port = self.base[len("http://"):].rsplit(":", 1)
        conn = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=2)
        try:
            conn.request("GET", "/health", headers={"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})
            resp = conn.getresponse()
            return resp.status == 200 and json.loads(resp.read() or b"{}").get("status") == "ok"
        except (OSError, ValueError):
            return False
        finally:
            conn.close()

    def wait(self) -> int:
        assert self.proc
        return self.proc.wait()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (the server drains and exits), then SIGKILL after `timeout`; only our own child."""
        if self.proc is None:
            return None
        self.stopped_on_purpose = True
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("the server did not stop within %.0f s; killing it", timeout)
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def wait_serving(server: ServerChild) -> int:
    """Block until the server exits; Ctrl+C stops it (the child gets the same SIGINT from the terminal)."""
    try:
        return server.wait()
    except KeyboardInterrupt:
        server.stop()
        return 130


def failure_text(server: ServerChild) -> str:
    code = server.proc.returncode if server.proc else None
    return f"the server stopped before serving (exit code {code})"


# ---- the two ways to show the dashboard ------------------------------------------------

def run_window(server: ServerChild, keep_serving: bool = False) -> int:
    """The splash, then the dashboard, in a pywebview (Qt) window. Closing it stops the server
    unless `keep_serving`; a server that stops by itself closes the window."""
    import webview

    os.environ.update(qt_env())
    window = webview.create_window(WINDOW_TITLE, html=splash_html(), width=WINDOW_SIZE[0], height=WINDOW_SIZE[1],
                                   min_size=(420, 480))
    outcome = {"code": 0}
    shown = threading.Event()

    def on_loaded() -> None:
        if server.base and (window.get_current_url() or "").startswith(server.base):
            shown.set()

    window.events.loaded += on_loaded

    def js(code: str) -> None:
        try:
            window.evaluate_js(code)
        except Exception as exc:  # noqa: BLE001 - pywebview raises backend-specific errors on a closing window
            log.debug("splash update failed: %s", exc)

    def drive() -> None:
        server.on_line = lambda line: js(splash_call("status", line))
        for line in list(server.tail):
            js(splash_call("status", line))
        if not server.wait_ready():
            server.on_line = None
            if server.running:  # it announced a URL but /health never answered
                server.stop()
            outcome["code"] = server.proc.returncode or 1 if server.proc else 1
            js(splash_call("fail", failure_text(server), "\n".join(server.tail)))
            print(f"colibri: {failure_text(server)}; close the window to quit", file=sys.stderr, flush=True)
            return
        server.on_line = None
        js(splash_call("status", f"Serving {server.model_id}; opening the dashboard…"))
        window.load_url(dashboard_url(server.base, server.api_key))
        if shown.wait(60):
            print(f"colibri: the dashboard is open in a window "
                  f"({'closing it leaves the server running' if keep_serving else 'closing it stops the server'})",
                  flush=True)
        code = server.wait()
        if not server.stopped_on_purpose:  # Ctrl+C in the terminal, a crash: nothing left to show
            outcome["code"] = code
            print(f"colibri: the server stopped (exit code {code}); closing the window", file=sys.stderr, flush=True)
            try:
                window.destroy()
            except Exception as exc:  # noqa: BLE001 - already closed (--keep-serving after the window went)
                log.debug("window.destroy: %s", exc)

    webview.start(drive, gui="qt")
    server.on_line = None  # the window is gone: lines no longer have a splash to go to
    if server.running and keep_serving:
        print(f"colibri: window closed; still serving at {server.base}/v1 (Ctrl+C stops)", flush=True)
        return wait_serving(server)
    if server.running:
        server.stop()
        print("colibri: window closed; server stopped", flush=True)
    return outcome["code"]


def run_browser(server: ServerChild, reason: str, no_browser: bool = False) -> int:
    """No native window: the default browser (`reason` says why, in one line), or nothing at all."""
    if not no_browser:
        print(f"colibri: no native window ({reason}); opening the dashboard in the browser instead", flush=True)
    if not server.wait_ready():
        print(f"colibri: {failure_text(server)}", file=sys.stderr, flush=True)
        return server.proc.returncode or 1 if server.proc else 1
    if not no_browser:
        url = dashboard_url(server.base, None)  # a key in a browser URL would stay in its history
        if not webbrowser.open(url):
            print(f"colibri: no browser found either; open {url} yourself", flush=True)
    return wait_serving(server)
