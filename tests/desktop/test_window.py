"""`coli web` under Xvfb: the pywebview (Qt) window shows the splash, then the real dashboard
on the real server; closing it stops the server."""
from __future__ import annotations

import re
import subprocess
import sys
import time

from tests.desktop.conftest import Output, assert_not_blank, close_by_title, save_shot, which
from tests.netcheck import refused
from tests.sidecar.serve_support import URL_LINE

KEY = "desktop-test-key"


def _web(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, Output]:
    proc = subprocess.Popen([sys.executable, "-m", "colibri", "web", "--port", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    return proc, Output(proc)


def test_the_window_shows_the_dashboard_and_closing_it_stops_the_server(desktop_env, xvfb, default_model):
    which("import")
    proc, out = _web(["--api-key", KEY, "-v"], desktop_env)
    try:
        serving = out.wait_for(URL_LINE.search, 180)
        assert serving, out.text()
        base = URL_LINE.search(serving).group(2)
        assert out.wait_for(lambda ln: "no native window" in ln or "dashboard is open in a window" in ln, 120) \
            == "colibri: the dashboard is open in a window (closing it stops the server)", out.text()
        # the page got the key from the launcher: its own /v1/models call is let in (the access log says 200)
        assert out.wait_for(re.compile(r'"GET /v1/models HTTP/1\.1" 200').search, 60), out.text()
        time.sleep(3)  # let it paint the model name and the server card
        assert_not_blank(save_shot("coli-web-dashboard.png", xvfb))
        assert close_by_title("colibri", xvfb, proc) == 0, out.text()
        assert out.wait_for(lambda ln: ln == "colibri: window closed; server stopped", 5), out.text()
        host, port = base[len("http://"):].rsplit(":", 1)
        assert refused(host, int(port)), "the server outlived its window"
    finally:
        proc.kill()


def test_a_server_that_cannot_start_is_explained_on_the_splash(desktop_env, xvfb, tmp_path):
    proc, out = _web(["--model", str(tmp_path / "missing.gguf")], desktop_env)
    try:
        assert out.wait_for(lambda ln: "close the window to quit" in ln, 120), out.text()
        assert "model file not found" in out.text()
        time.sleep(2)
        assert_not_blank(save_shot("coli-web-failed.png", xvfb))
        assert close_by_title("colibri", xvfb, proc) != 0
    finally:
        proc.kill()


def test_keep_serving_outlives_the_window(desktop_env, xvfb, default_model):
    import signal
    import urllib.request

    proc, out = _web(["--keep-serving"], desktop_env)
    try:
        serving = out.wait_for(URL_LINE.search, 180)
        assert serving, out.text()
        base = URL_LINE.search(serving).group(2)
        assert out.wait_for(lambda ln: "closing it leaves the server running" in ln, 120), out.text()
        from tests.desktop.xwindows import close_window, find_windows

        for wid in find_windows("colibri", xvfb):
            close_window(wid, xvfb)
        assert out.wait_for(lambda ln: ln.startswith("colibri: window closed; still serving at"), 60), out.text()
        with urllib.request.urlopen(base + "/health", timeout=10) as r:
            assert r.status == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 128 + signal.SIGTERM
        host, port = base[len("http://"):].rsplit(":", 1)
        assert refused(host, int(port))
    finally:
        proc.kill()
