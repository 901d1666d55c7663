"""`coli web` without a window: its pure pieces, the serve-only and browser paths on the real server.

The window itself (pywebview under Xvfb), the frozen sidecar and the Tauri shell
are tested by desktop/test.sh (tests/desktop/).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from colibri import desktop
from colibri.cli import build_parser
from colibri.commands.web import _serve_parser
from tests.netcheck import refused
from tests.sidecar.serve_support import URL_LINE, wait_for


def test_web_is_a_real_command_no_longer_planned():
    from colibri.commands.planned import PLANNED

    assert "web" not in PLANNED
    sub = build_parser()._subparsers._group_actions[0]
    assert "not built" not in sub.choices["web"].format_help()


def test_serve_flags_round_trip_to_the_child_and_the_key_stays_out_of_argv():
    args = build_parser().parse_args([
        "web", "--model", "/m.gguf", "--port", "0", "--kv-slots", "2", "--no-kv-persist", "--allowed-host", "a",
        "--allowed-host", "b", "--allow-insecure-bind", "-v", "-v", "--api-key", "sekrit", "--keep-serving",
        "--cors-origin", "+http://x", "--queue-timeout", "2.5", "--prefetch"])
    argv = desktop.serve_argv(args, _serve_parser())
    assert "sekrit" not in argv and "--keep-serving" not in argv
    again = build_parser().parse_args(["serve", *argv])
    for dest in ("model", "port", "kv_slots", "kv_persist", "allowed_host", "allow_insecure_bind", "serve_verbose",
                 "cors_origin", "queue_timeout", "prefetch"):
        assert getattr(again, dest) == getattr(args, dest), dest
    assert desktop.serve_argv(build_parser().parse_args(["web"]), _serve_parser()) == []


def test_splash_is_one_self_contained_page_and_calls_escape_anything():
    html = desktop.splash_html()
    assert "<style>" in html and "window.colibriSplash" in html
    assert 'href="splash.css"' not in html and 'src="splash.js"' not in html
    hostile = 'a"b\'c</script><img src=x onerror=alert(1)>\n'
    call = desktop.splash_call("status", hostile)
    assert call.startswith("window.colibriSplash && window.colibriSplash.status(")
    assert json.loads(call[call.index("(") + 1:-1]) == hostile


def test_dashboard_url_hands_the_key_over_in_the_fragment():
    assert desktop.dashboard_url("http://127.0.0.1:9/", None) == "http://127.0.0.1:9/"
    assert desktop.dashboard_url("http://127.0.0.1:9", "k1") == "http://127.0.0.1:9/#key=k1"


def test_port_is_free():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert not desktop.port_is_free("127.0.0.1", port)
    assert desktop.port_is_free("127.0.0.1", port)


def test_no_display_means_no_window_in_one_line():
    reason = desktop.gui_unavailable_reason(env={"PATH": os.environ.get("PATH", "")}, probe=False)
    assert reason and "\n" not in reason
    assert "no display" in reason or "pip install 'colibri[desktop]'" in reason


def test_qt_failures_are_named_by_their_first_complaint():
    no_display = ("qt.qpa.xcb: could not connect to display :77\n"
                  "qt.qpa.plugin: From 6.5.0, xcb-cursor0 or libxcb-cursor0 is needed to load the Qt xcb platform "
                  "plugin.\nThis application failed to start because no Qt platform plugin could be initialized.\n")
    assert desktop.qt_failure_hint(no_display) == "could not connect to display :77"
    assert desktop.qt_failure_hint("Segmentation fault\n") == "Segmentation fault"
    assert desktop.qt_failure_hint("") == ""


def _start_web(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, list[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "colibri", "web", "--port", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    lines: list[str] = []
    base = ""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        m = URL_LINE.search(line)
        if m:
            base = m.group(2)
            break
    assert base, "".join(lines)
    return proc, lines, base


def _health(base: str) -> dict:
    import urllib.request

    with urllib.request.urlopen(base + "/health", timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture()
def web_env(tmp_path):
    env = {**os.environ, "COLI_STATE_DIR": str(tmp_path / "state")}
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "COLI_API_KEY", "COLI_PORT"):
        env.pop(name, None)
    return env


def test_no_browser_serves_until_sigterm_and_then_stops_its_server(web_env, default_model):
    proc, lines, base = _start_web(["--no-browser"], web_env)
    try:
        assert _health(base)["status"] == "ok"
        assert not any("no native window" in ln for ln in lines)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 128 + signal.SIGTERM
        host, port = base[len("http://"):].rsplit(":", 1)
        assert wait_for(lambda: refused(host, int(port)), 30), "the server outlived `coli web`"
    finally:
        proc.kill()


def test_without_a_display_it_says_why_and_opens_the_browser(web_env, default_model, tmp_path):
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "fake-browser"
    browser.write_text(f"#!/bin/sh\necho \"$@\" >> {opened}\n")
    browser.chmod(0o755)
    proc, lines, base = _start_web([], {**web_env, "BROWSER": str(browser)})
    try:
        why = [ln for ln in lines if "no native window" in ln]
        assert len(why) == 1, "".join(lines)
        assert "opening the dashboard in the browser" in why[0]
        assert wait_for(lambda: opened.exists() and opened.read_text().strip(), 30)
        assert opened.read_text().split() == [base + "/"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
