"""`coli models pull REPO[:FILE]` with huggingface_hub against a local server in the Hub's layout
(tests/sidecar/hub_server.py), real CLI, tiny real GGUFs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_coli
from tests.engine.tiny_models import write_tiny
from tests.fixtures.split_gguf import split_gguf
from tests.sidecar.hub_server import HubServer


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory) -> dict[str, bytes]:
    d = tmp_path_factory.mktemp("ggufs")
    return {"q4": write_tiny(d / "a.gguf", family="qwen2").read_bytes(),
            "q8": write_tiny(d / "b.gguf", family="llama", seed=2).read_bytes(),
            "p1": write_tiny(d / "c.gguf", family="qwen3").read_bytes(),
            "p2": write_tiny(d / "d.gguf", family="qwen3", seed=3).read_bytes()}


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    return {"HOME": str(tmp_path / "home"), "COLI_DATA_DIR": str(tmp_path / "data"),
            "COLI_CACHE_DIR": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": "",
            "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "0", "COLI_MODELS_DIR": ""}


def pull(hub: HubServer, env: dict, *args: str):
    return run_coli("models", "pull", *args, env={**env, "HF_ENDPOINT": hub.url}, timeout=120)


CHUNK = 10 << 20  # huggingface_hub writes (and so resumes) in chunks of 10 MiB


def test_pull_picks_q4_k_m_resumes_a_cut_transfer_and_verifies(ggufs, env):
    big = ggufs["q4"] + bytes(CHUNK + (2 << 20))  # past the data section: the reader ignores it
    repo = {"tiny-Q8_0.gguf": ggufs["q8"], "tiny-Q4_K_M.gguf": big, "README.md": b"# tiny\n"}
    with HubServer({"org/tiny-GGUF": repo}) as hub:
        hub.cut_after["tiny-Q4_K_M.gguf"] = CHUNK + (1 << 20)  # the connection drops 11 MiB in
        done = pull(hub, env, "org/tiny-GGUF")
        assert done.returncode == 0, done.stderr
        path = Path(done.stdout.strip())
        assert path == Path(env["COLI_DATA_DIR"]) / "models" / "hf" / "org" / "tiny-GGUF" / "tiny-Q4_K_M.gguf"
        assert path.read_bytes() == big
        gets = [r for m, p, r in hub.log if m == "GET" and p.endswith("tiny-Q4_K_M.gguf")]
        assert gets == [None, f"bytes={CHUNK}-"]  # the second GET resumed from the last whole chunk
        # verified once: a second pull needs no network
        n = len(hub.log)
        again = pull(hub, env, "org/tiny-GGUF:Q4_K_M")
        assert again.returncode == 0 and Path(again.stdout.strip()) == path and len(hub.log) == n + 1  # the tree only
    listed = run_coli("models", "list", "--json", env=env)
    row = next(r for r in json.loads(listed.stdout)["models"] if r["path"] == str(path))
    assert row["id"] == "tiny-q4_k_m" and row["owned"] and row["arch"] == "qwen2"
    gone = run_coli("models", "rm", "tiny-q4_k_m", "--yes", env=env)
    assert gone.returncode == 0 and not path.exists()


def test_a_pull_stopped_halfway_resumes_in_the_next_run(ggufs, env):
    big = ggufs["q8"] + bytes(CHUNK + (2 << 20))
    with HubServer({"org/slow": {"slow-Q8_0.gguf": big}}) as hub:
        hub.stall_after["slow-Q8_0.gguf"] = CHUNK + (1 << 20)  # then nothing more: the user presses Ctrl+C
        folder = Path(env["COLI_DATA_DIR"]) / "models" / "hf" / "org" / "slow"
        proc = subprocess.Popen([sys.executable, "-m", "colibri", "models", "pull", "org/slow"],
                                env={**os.environ, **env, "HF_ENDPOINT": hub.url}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while sum(p.stat().st_size for p in folder.glob("*.part")) < CHUNK and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            proc.kill()
            proc.wait()
        assert [p.stat().st_size for p in folder.glob("*.part")] == [CHUNK]  # what the stopped run kept
        done = pull(hub, env, "org/slow")
        assert done.returncode == 0, done.stderr
        assert Path(done.stdout.strip()).read_bytes() == big and not list(folder.glob("*.part"))
        gets = [r for m, p, r in hub.log if m == "GET" and p.endswith("slow-Q8_0.gguf")]
        assert gets == [None, f"bytes={CHUNK}-"]  # the second run asked only for the rest


def test_pull_refuses_bytes_that_do_not_match_the_hubs_checksum(ggufs, env):
    with HubServer({"org/bad": {"bad-Q8_0.gguf": ggufs["q8"]}}) as hub:
        hub.corrupt.add("bad-Q8_0.gguf")
        done = pull(hub, env, "org/bad:bad-Q8_0.gguf")
    assert done.returncode == 1 and "checksum_mismatch" in done.stderr
    assert not (Path(env["COLI_DATA_DIR"]) / "models" / "hf" / "org" / "bad" / "bad-Q8_0.gguf").exists()


def test_pull_joins_a_split_model_and_names_missing_repos(ggufs, env, tmp_path):
    whole = tmp_path / "big-Q8_0.gguf"
    whole.write_bytes(ggufs["p1"])
    parts = {p.name: p.read_bytes() for p in split_gguf(whole, 2, tmp_path)}
    assert sorted(parts) == ["big-Q8_0-00001-of-00002.gguf", "big-Q8_0-00002-of-00002.gguf"]
    with HubServer({"org/split": parts}) as hub:
        done = pull(hub, env, "org/split:Q8_0")
        assert done.returncode == 0, done.stderr
        folder = Path(env["COLI_DATA_DIR"]) / "models" / "hf" / "org" / "split"
        assert Path(done.stdout.strip()) == folder / "big-Q8_0.gguf"
        assert sorted(p.name for p in folder.glob("*.gguf")) == ["big-Q8_0.gguf"]  # the parts went once joined
        assert (folder / "big-Q8_0.gguf").read_bytes() == ggufs["p1"]  # what llama-gguf-split --merge writes
        missing = pull(hub, env, "org/nope")
        assert missing.returncode == 2 and "org/nope is not on the Hub" in missing.stderr
        none = pull(hub, env, "org/split:Q5_K_M")
        assert none.returncode == 2 and "no GGUF in org/split matches Q5_K_M" in none.stderr
    rows = json.loads(run_coli("models", "list", "--json", "--check", env=env).stdout)["models"]
    row = next(r for r in rows if r["id"] == "big-q8_0")
    assert len(row["parts"]) == 1 and row["runnable"] is True


def test_choose_is_pure():
    from colibri.library.hub import HubFile, choose

    f = [HubFile(n, 1, None, "x") for n in ("m-Q4_K_M.gguf", "m-Q8_0.gguf", "mmproj-m-f16.gguf", "a.txt")]
    assert [x.path for x in choose(f, None)] == ["m-Q4_K_M.gguf"]
    assert [x.path for x in choose(f, "q8_0")] == ["m-Q8_0.gguf"]
    assert [x.path for x in choose(f[1:], None)] == ["m-Q8_0.gguf"]  # the only model (mmproj is not one)
    assert os.sep  # keep the import used on every platform
