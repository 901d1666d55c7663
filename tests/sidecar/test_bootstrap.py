"""scripts/bootstrap.sh, which run.sh and test.sh both source: one install for both commands.

The real script runs on a throwaway copy of what its digest reads (pyproject.toml, setup.py,
the engine's sources) with a throwaway virtual environment whose `python` is this
interpreter, except that `python -m pip ...` is written to a log instead of run: what the
test checks is the script's decision (install and compile, the extras' dependencies only,
or nothing), read from that log and from the line the script prints when it installs.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPILE_LINE = "installing colibri and compiling the engine (pip install -e)"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="bootstrap.sh is a bash script")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the files the install digest reads, and scripts/bootstrap.sh itself."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "bootstrap.sh", root / "scripts")
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy2(ROOT / name, root / name)
    (root / "engine").mkdir()
    shutil.copy2(ROOT / "engine" / "build_engine.py", root / "engine")
    for sub in ("include", "src"):
        shutil.copytree(ROOT / "engine" / sub, root / "engine" / sub)
    return root


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A virtual environment whose python is this one, with pip calls logged instead of run."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f"""#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
    shift 2
    echo "pip $*" >>"{venv}/pip.log"
    exit 0
fi
exec "{sys.executable}" "$@"
""")
    python.chmod(0o755)
    return venv


def bootstrap(checkout: Path, venv: Path, extras: str) -> tuple[str, list[str], float]:
    """Source bootstrap.sh as run.sh (extras "") or test.sh ("test") does: (stderr, pip calls, seconds)."""
    log = venv / "pip.log"
    before = log.read_text().splitlines() if log.exists() else []
    env = {**os.environ, "COLI_VENV": str(venv), "COLI_EXTRAS": extras}
    t0 = time.monotonic()
    done = subprocess.run(["bash", "-c", f'source "{checkout}/scripts/bootstrap.sh"'], env=env, capture_output=True,
                          text=True, timeout=120)
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    after = log.read_text().splitlines() if log.exists() else []
    return done.stderr, after[len(before):], took


def test_run_then_test_then_run_compiles_once(checkout, venv):
    err, pip, _ = bootstrap(checkout, venv, "")  # ./scripts/run.sh on a fresh venv: install and compile
    assert COMPILE_LINE in err
    assert pip == [f"pip install -q --no-build-isolation -e {checkout}"]
    err, pip, _ = bootstrap(checkout, venv, "test")  # then ./scripts/test.sh: the test extra's packages only
    assert COMPILE_LINE not in err and "extras: test" in err
    assert len(pip) == 1 and "-e" not in pip[0].split() and "pytest>=8" in pip[0]
    err, pip, took = bootstrap(checkout, venv, "")  # and run.sh again: nothing to do
    assert (err, pip) == ("", [])
    assert took < 30, f"a bootstrap with nothing to do took {took:.1f} s"
    assert (venv / ".colibri-install").read_text().splitlines()[1] == "extras=test"


def test_test_then_run_does_nothing_the_second_time(checkout, venv):
    err, pip, _ = bootstrap(checkout, venv, "test")
    assert COMPILE_LINE in err and pip == [f"pip install -q --no-build-isolation -e {checkout}[test]"]
    err, pip, _ = bootstrap(checkout, venv, "")  # a superset of the extras satisfies run.sh's none
    assert (err, pip) == ("", [])
    err, pip, _ = bootstrap(checkout, venv, "test")
    assert (err, pip) == ("", [])


def test_a_changed_source_reinstalls_with_every_extra_installed_so_far(checkout, venv):
    bootstrap(checkout, venv, "test")
    bootstrap(checkout, venv, "desktop")  # an extra more: its packages, no compile
    assert (venv / ".colibri-install").read_text().splitlines()[1] == "extras=desktop,test"
    with open(checkout / "engine" / "src" / "sample.c", "a") as f:
        f.write("\n/* changed */\n")
    err, pip, _ = bootstrap(checkout, venv, "")  # run.sh after a change: compiled again, keeping the extras
    assert COMPILE_LINE in err
    assert pip == [f"pip install -q --no-build-isolation -e {checkout}[desktop,test]"]


def test_a_stamp_of_the_old_format_reinstalls_once(checkout, venv):
    (venv / ".colibri-install").write_text("0" * 64 + "\n")  # one digest line, extras folded into it
    err, _, _ = bootstrap(checkout, venv, "")
    assert COMPILE_LINE in err
    assert bootstrap(checkout, venv, "")[:2] == ("", [])


# ---- scripts/run.sh: `coli web` with every serve flag, headless with --no-browser or without a display ----

def _run_sh(args: list[str], venv: Path, env: dict[str, str]) -> tuple[subprocess.Popen, list[str], str]:
    """./scripts/run.sh ARGS of this checkout with `venv` as its environment, waited for until it
    prints its URL: (process, lines so far, base URL)."""
    from tests.sidecar.serve_support import URL_LINE
    from tests.speed import scaled

    proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "run.sh"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    lines: list[str] = []
    deadline = time.monotonic() + scaled(180)
    for line in proc.stdout:
        lines.append(line)
        m = URL_LINE.search(line)
        if m:
            return proc, lines, m.group(2)
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise AssertionError("run.sh did not serve:\n" + "".join(lines))


@pytest.fixture
def stamped_venv(venv: Path) -> Path:
    """The throwaway environment as bootstrap.sh leaves it for this checkout (its pip calls logged,
    none run), with `coli` as this interpreter's colibri."""
    coli = venv / "bin" / "coli"
    coli.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m colibri "$@"\n')
    coli.chmod(0o755)
    env = {**os.environ, "COLI_VENV": str(venv), "COLI_EXTRAS": "test"}
    subprocess.run(["bash", "-c", f'source "{ROOT}/scripts/bootstrap.sh"'], env=env, check=True, capture_output=True,
                   timeout=120)
    (venv / "pip.log").unlink()
    return venv


@pytest.mark.parametrize("display", [True, False], ids=["no-browser-flag", "no-display"])
def test_run_sh_takes_web_and_serve_flags_and_serves_headless(stamped_venv, default_model, tmp_path, display):
    import json
    import signal
    import urllib.request

    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text("<!doctype html><title>dashboard</title>")
    env = {**os.environ, "COLI_VENV": str(stamped_venv), "COLI_WEB_DIR": str(dist),
           "COLI_STATE_DIR": str(tmp_path / "state")}
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "COLI_API_KEY", "COLI_PORT", "COLI_EXTRAS"):
        env.pop(name, None)
    args = ["--model", str(default_model), "--port", "0", "--kv-slots", "2"]
    if display:  # a display, and --no-browser: nothing opens
        env["DISPLAY"] = ":99"
        args.append("--no-browser")
    proc, lines, base = _run_sh(args, stamped_venv, env)
    try:
        with urllib.request.urlopen(base + "/health", timeout=10) as r:
            assert json.loads(r.read())["status"] == "ok"
        with urllib.request.urlopen(base + "/", timeout=10) as r:
            assert b"<title>dashboard</title>" in r.read()
        assert not any("no native window" in ln for ln in lines), "".join(lines)
        assert any("no display" in ln for ln in lines) is (not display), "".join(lines)
        assert not (stamped_venv / "pip.log").exists(), "run.sh installed again after test.sh's bootstrap"
        assert not any("installing" in ln for ln in lines), "".join(lines)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 128 + signal.SIGTERM
