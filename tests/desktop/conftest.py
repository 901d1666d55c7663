"""The desktop tests need an X server, a frozen sidecar and a Tauri build: desktop/test.sh
installs and builds all three, then runs them with COLI_DESKTOP_TESTS=1. Elsewhere they skip."""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SIDECAR = Path(os.environ.get("COLI_SIDECAR") or ROOT / "build/desktop/sidecar/colibri-sidecar/colibri-sidecar")
TAURI_BIN = Path(os.environ.get("COLI_TAURI_BIN")
                 or Path.home() / ".cache/colibri/cargo-target/debug/colibri-desktop")
SHOTS = Path(os.environ.get("COLI_DESKTOP_OUT") or ROOT / "build/desktop/screens")
SCREEN = "1400x900x24"


def pytest_collection_modifyitems(config, items):
    if os.environ.get("COLI_DESKTOP_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="desktop tests (Xvfb, PyInstaller, Tauri): run desktop/test.sh")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def xvfb() -> str:
    """A private X server; its display name (":N")."""
    read, write = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", SCREEN, "-nolisten", "tcp"],
                            pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as f:
        number = f.readline().strip()
    assert number, "Xvfb did not start"
    yield f":{number}"
    proc.terminate()
    proc.wait(10)


@pytest.fixture()
def desktop_env(xvfb, tmp_path) -> dict[str, str]:
    env = {**os.environ, "DISPLAY": xvfb, "COLI_STATE_DIR": str(tmp_path / "state"),
           "COLI_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("WAYLAND_DISPLAY", "COLI_API_KEY", "COLI_PORT", "COLI_SIDECAR", "XAUTHORITY"):
        env.pop(name, None)
    return env


class Output:
    """A child's merged output, read on a thread; wait for a line matching a predicate."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: list[str] = []
        self._cv = threading.Condition()
        threading.Thread(target=self._pump, args=(proc,), daemon=True).start()

    def _pump(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            with self._cv:
                self.lines.append(line.rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            self.lines.append("<eof>")
            self._cv.notify_all()

    def wait_for(self, predicate, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        with self._cv:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if predicate(line):
                        return line
                seen = len(self.lines)
                if "<eof>" in self.lines or not self._cv.wait(max(0.0, deadline - time.monotonic())):
                    if time.monotonic() >= deadline or "<eof>" in self.lines:
                        return None

    def text(self) -> str:
        return "\n".join(self.lines)


def save_shot(name: str, display_name: str) -> Path:
    from tests.desktop.xwindows import screenshot

    SHOTS.mkdir(parents=True, exist_ok=True)
    return screenshot(SHOTS / name, display_name)


def assert_not_blank(png: Path) -> None:
    """A rendered page, not an empty window: many colours and real contrast (ImageMagick)."""
    out = subprocess.run(["convert", str(png), "-colorspace", "gray", "-format", "%k %[fx:standard_deviation]",
                          "info:"], capture_output=True, text=True, check=True).stdout.split()
    colours, spread = int(out[0]), float(out[1])
    assert colours >= 64 and spread >= 0.05, f"{png} looks blank: {colours} grey levels, std {spread:.3f}"


def close_by_title(title: str, display_name: str, proc: subprocess.Popen, timeout: float = 60) -> int:
    """Close the window as its close button would, until the process exits; its exit code."""
    from tests.desktop.xwindows import close_window, find_windows

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for wid in find_windows(title, display_name):
            close_window(wid, display_name)
        try:
            return proc.wait(5)
        except subprocess.TimeoutExpired:
            continue
    raise AssertionError(f"the {title!r} window did not close within {timeout} s")


def require(path: Path, what: str) -> Path:
    if not path.is_file():
        pytest.fail(f"{what} is missing at {path}: desktop/test.sh builds it")
    return path


def which(name: str) -> str:
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: desktop/test.sh installs it")
    return found
