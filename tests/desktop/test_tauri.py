"""The Tauri shell (desktop/src-tauri) under Xvfb: it starts the frozen sidecar with a
per-launch key, shows the dashboard, and stops the sidecar when its window closes."""
from __future__ import annotations

import http.client
import re
import subprocess
import time

from tests.desktop.conftest import (SIDECAR, TAURI_BIN, Output, assert_not_blank, close_by_title, require,
                                    save_shot)
from tests.netcheck import refused

READY = re.compile(r"\[colibri\] (\S+) is ready at (http://\S+); showing the dashboard")


def _status(base: str, path: str) -> int:
    host, port = base[len("http://"):].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", path)
    status = conn.getresponse().status
    conn.close()
    return status


def test_the_shell_starts_its_sidecar_shows_the_dashboard_and_stops_it(desktop_env, xvfb, default_model):
    shell = require(TAURI_BIN, "the Tauri shell")
    # the frozen sidecar's own default (the instruct model it carries), not the test suite's Gemma
    env = {**desktop_env, "COLI_SIDECAR": str(require(SIDECAR, "the frozen sidecar"))}
    env.pop("COLI_DEFAULT_MODEL", None)
    proc = subprocess.Popen([str(shell)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out = Output(proc)
    try:
        line = out.wait_for(READY.search, 300)
        assert line, out.text()
        base = READY.search(line).group(2)
        assert _status(base, "/health") == 200
        assert _status(base, "/v1/models") == 401, "the sidecar should want this launch's key"
        time.sleep(6)  # WebKitGTK on a software-rendered X server: let the dashboard load and paint
        assert_not_blank(save_shot("tauri-dashboard.png", xvfb))
        assert close_by_title("colibri", xvfb, proc) == 0, out.text()
        assert "[colibri] stopping the sidecar" in out.text()
        host, port = base[len("http://"):].rsplit(":", 1)
        assert refused(host, int(port)), "the sidecar outlived the shell"
    finally:
        proc.kill()
