"""The wheel carries the dashboard: build colibri's wheel as `pip wheel .` does (setup.py copies
web/dist into the package as colibri/web_dist, building it with npm first when it is missing or
stale), install it into a fresh virtual environment outside the checkout, start its `coli
serve`, and load every page of the dashboard it serves in headless Chromium.

The fresh environment borrows the project venv's dependencies through a .pth line (aiohttp,
cffi, ... are not downloaded again: offline and quick), never its editable colibri."""
from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.sidecar.chromium import Chromium, chromium_path
from tests.sidecar.serve_support import ServerProcess

PAGES = {"chat": "chat", "systemone": "system-one", "brain": "brain", "profiling": "profiling",
         "models": "models", "settings": "settings"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if not (ROOT / "web" / "dist" / "index.html").is_file() and shutil.which("npm") is None:
        pytest.skip("neither web/dist nor npm to build it")
    out = tmp_path_factory.mktemp("wheel")
    # the engine as bootstrap.sh compiled it from these sources for the editable install, not compiled again
    # (setup.py BuildExt): what the wheel adds is its packaging, checked here
    from colibri import _engine

    env = {**os.environ, "COLI_ENGINE_PREBUILT": _engine.__file__}
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = out.glob("colibri-*.whl")
    return path


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> Path:
    """A fresh venv with the wheel installed (no pip of its own: the project's installs into it)."""
    where = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300, env=_env())
    assert done.returncode == 0, done.stdout + done.stderr
    # then the project venv's packages as a plain path (its .pth files, the editable colibri's among them,
    # are not run); after the install, or pip would take the editable colibri for this one
    Path(site, "project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return where


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLI_WEB_DIR")}


def test_the_installed_package_is_the_wheel_and_carries_the_dashboard(venv):
    code = "import colibri, colibri.serve_config as c; print(colibri.__file__); print(c.default_web_dir())"
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code],
                       capture_output=True, text=True, env=_env(), cwd=venv, timeout=60)
    assert r.returncode == 0, r.stderr
    module, web_dir = r.stdout.split()
    assert module.startswith(str(venv)), module  # not the checkout's colibri
    assert web_dir.startswith(str(venv)) and web_dir.endswith("colibri/web_dist"), web_dir


def test_the_wheels_coli_serves_every_dashboard_page(venv, default_model):
    if chromium_path() is None:
        message = "Chromium is not installed (apt-get install chromium; scripts/test.sh does it)"
        if os.environ.get("COLI_REQUIRE_CHROMIUM") == "1":
            pytest.fail(message)
        pytest.skip(message)
    dist = ROOT / "web" / "dist"
    srv = ServerProcess(["--model", str(default_model), "--ctx", "256", "--no-kv-persist", "--threads", "2"],
                        command=[str(venv / "bin" / "coli")], cwd=venv)
    srv.env = {k: v for k, v in srv.env.items() if k not in ("PYTHONPATH", "COLI_WEB_DIR")}  # nothing of the checkout
    with srv:
        status, headers, index = srv.get("/")
        assert status == 200 and headers["content-type"].startswith("text/html")
        assert index == (dist / "index.html").read_bytes()  # the built page, not "the dashboard is not built"
        bundle = re.search(rb'src="(/assets/index-[^"]+\.js)"', index).group(1).decode()
        status, _, js = srv.get(bundle)
        assert status == 200 and js == (dist / bundle.lstrip("/")).read_bytes()
        asyncio.run(_visit_pages(srv.base))


async def _visit_pages(base: str) -> None:
    async with Chromium() as browser:
        page = await browser.page()
        for name, path in PAGES.items():
            await page.goto(f"{base}/{path}")
            shown = await page.evaluate(
                f"""new Promise(resolve => {{
                      const t0 = Date.now();
                      const look = () => {{
                        const el = document.querySelector('[data-testid="page-{name}"]');
                        const broken = document.querySelector('main [role="alert"]');
                        if (el || broken || Date.now() - t0 > 15000)
                          resolve({{shown: !!el, broken: broken ? broken.textContent : null}});
                        else setTimeout(look, 100);
                      }};
                      look();
                    }})""")
            assert shown == {"shown": True, "broken": None}, (name, shown)
        failed = [r for r in page.responses if r.get("error") or (r.get("status") or 200) >= 400]
        assert not failed, failed
