"""Build hook: pyproject.toml holds the metadata; this names the cffi module and ships the dashboard.

The dashboard (web/dist) goes into the package as colibri/web_dist, so an
installed wheel serves it with no checkout (colibri.serve_config.default_web_dir):

- building the wheel or the sdist builds web/ first (npm ci, npm run build) when
  its sources are here and web/dist is missing or older than them;
- the sdist carries the built web/dist (MANIFEST.in), so a wheel built from it
  needs no Node.js;
- an editable install (`pip install -e .`) builds nothing: it serves the
  checkout's web/dist, which scripts/run.sh builds.

COLI_BUILD_WEB=0 never runs npm (an existing web/dist is still shipped); =1
always rebuilds (npm ci only when web/node_modules was not installed from this
package-lock.json, web/test.sh's stamp). Without npm and without web/dist the
package is built without the dashboard, and says so. COLI_ENGINE_PREBUILT=<a
built _engine .so> ships that engine instead of compiling it (the wheel test).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
WEB = ROOT / "web"
DIST = WEB / "dist"
# what the dashboard is built from (web/dist is stale when one of them is newer)
WEB_SOURCES = ("src", "public", "index.html", "package.json", "package-lock.json", "vite.config.ts",
               "tsconfig.json", "tsconfig.app.json", "tsconfig.node.json")


def _say(message: str) -> None:
    print(f"colibri build: {message}", flush=True)


def _newest_source() -> float:
    newest = 0.0
    for name in WEB_SOURCES:
        path = WEB / name
        files = [path] if path.is_file() else (p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
        for f in files:
            newest = max(newest, f.stat().st_mtime)
    return newest


def build_web() -> None:
    """web/dist, built with npm when the sources are here and it is missing or stale."""
    mode = os.environ.get("COLI_BUILD_WEB", "")
    if mode == "0" or not (WEB / "package.json").is_file():
        return
    index = DIST / "index.html"
    if mode != "1" and index.is_file() and index.stat().st_mtime >= _newest_source():
        return
    if shutil.which("npm") is None:
        _say("npm not found: " + ("shipping the existing, older web/dist" if index.is_file()
                                  else "the package will not carry the dashboard (install Node.js 20.19+)"))
        return
    stamp, lock = WEB / "node_modules" / ".stamp-lock", WEB / "package-lock.json"
    if stamp.is_file() and stamp.read_bytes() == lock.read_bytes():  # web/test.sh's mark: installed from this lock
        _say("building the dashboard (npm run build in web/)")
    else:
        _say("building the dashboard (npm ci, npm run build in web/)")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=WEB, check=True)
        shutil.copyfile(lock, stamp)
    subprocess.run(["npm", "run", "build", "--silent"], cwd=WEB, check=True)


class BuildPy(build_py):
    """build_py, then web/dist copied into the package as colibri/web_dist (not for editable installs)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        build_web()
        target = Path(self.build_lib) / "colibri" / "web_dist"
        shutil.rmtree(target, ignore_errors=True)
        if (DIST / "index.html").is_file():
            shutil.copytree(DIST, target, ignore=shutil.ignore_patterns(".*"))
        else:
            _say("web/dist is not built: the package carries no dashboard")


class BuildExt(build_ext):
    """build_ext; COLI_ENGINE_PREBUILT=<a built colibri/_engine .so> ships that file instead of compiling the
    engine again (tests/sidecar/test_wheel_dashboard.py packs the checkout's editable build, compiled from the
    same sources by scripts/bootstrap.sh)."""

    def build_extension(self, ext) -> None:
        prebuilt = os.environ.get("COLI_ENGINE_PREBUILT")
        if not (prebuilt and ext.name == "colibri._engine"):
            return super().build_extension(ext)
        dest = Path(self.get_ext_fullpath(ext.name))
        if Path(prebuilt).name != dest.name:
            raise SystemExit(f"COLI_ENGINE_PREBUILT={prebuilt}: not a build of {dest.name}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(prebuilt, dest)
        _say(f"the engine: {prebuilt} (COLI_ENGINE_PREBUILT), not compiled again")


class Sdist(sdist):
    """sdist with a freshly built web/dist inside (MANIFEST.in grafts it)."""

    def run(self) -> None:
        build_web()
        super().run()


setup(cffi_modules=["engine/build_engine.py:ffibuilder"], cmdclass={"build_py": BuildPy, "build_ext": BuildExt, "sdist": Sdist})
