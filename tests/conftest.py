"""Shared fixtures: the real default model, and GGUF files written by the tests."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def scratch_state_and_cache(tmp_path_factory):
    """Learned heat and persisted KV slots of test servers go to scratch folders, never the user's."""
    for var in ("COLI_CACHE_DIR", "COLI_STATE_DIR"):
        os.environ.setdefault(var, str(tmp_path_factory.mktemp(var.lower())))


@pytest.fixture(scope="session")
def default_model() -> Path:
    """The embedded default model (Gemma 3 270M Q4_K_M), assembled once per machine."""
    from colibri.models import default_model_path

    return default_model_path(progress=False)


@pytest.fixture(scope="session")
def asan_gguf_check() -> Path:
    """engine/build/asan/gguf_check: the reader under AddressSanitizer + UBSan."""
    subprocess.run(["make", "-s", "-C", str(ROOT / "engine"), "asan"], check=True)
    return ROOT / "engine" / "build" / "asan" / "gguf_check"


def run_coli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real `coli` command line in a child process."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "colibri", *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )
