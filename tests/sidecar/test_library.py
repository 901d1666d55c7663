"""The model library: discovery over fake trees laid out as the Hugging Face cache, LM Studio,
llama.cpp and --models-dir lay them out (tiny real GGUFs), and the real `coli models` commands."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_coli
from tests.engine.tiny_models import write_tiny


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A scratch HOME, data and cache folder; the usual places empty until a test fills them."""
    env = {"HOME": str(tmp_path / "home"), "COLI_DATA_DIR": str(tmp_path / "data"),
           "COLI_CACHE_DIR": str(tmp_path / "cache"), "XDG_CACHE_HOME": "", "HF_HOME": "", "HF_HUB_CACHE": "",
           "HUGGINGFACE_HUB_CACHE": "", "LLAMA_CACHE": "", "COLI_MODELS_DIR": ""}
    for k, v in env.items():
        monkeypatch.setenv(k, v) if v else monkeypatch.delenv(k, raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def hf_file(hub: Path, repo: str, name: str, family: str = "qwen2") -> Path:
    """A file as huggingface_hub stores it: the bytes in blobs/, a symlink in snapshots/REV/."""
    folder = hub / f"models--{repo.replace('/', '--')}"
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    snap = folder / "snapshots" / "0123abcd"
    snap.mkdir(parents=True, exist_ok=True)
    blob = write_tiny(folder / "blobs" / f"blob-{name}", family=family)
    (snap / name).symlink_to(blob)
    return snap / name


def test_every_usual_place_is_found_once_with_its_header(home, tmp_path, monkeypatch):
    from colibri.library import scan

    hf_file(home / ".cache" / "huggingface" / "hub", "org/Tiny-GGUF", "tiny-q8_0.gguf")
    lm = home / ".lmstudio" / "models" / "pub" / "repo"
    lm.mkdir(parents=True)
    write_tiny(lm / "lm-llama.gguf", family="llama")
    llama = tmp_path / "llamacache"
    llama.mkdir()
    write_tiny(llama / "from-llama-cpp.gguf", family="qwen3")
    monkeypatch.setenv("LLAMA_CACHE", str(llama))
    extra = tmp_path / "extra"
    extra.mkdir()
    write_tiny(extra / "tiny-q8_0.gguf", family="gemma3")  # the same name as the Hub's: told apart
    os.symlink(lm, extra / "link-to-lm")  # a folder reached twice is one model (dirs are not followed anyway)
    (lm / "lm-llama-copy.gguf").symlink_to(lm / "lm-llama.gguf")  # the same file twice: listed once

    entries = {e.id: e for e in scan([extra])}
    assert set(entries) == {"tiny-q8_0", "lm-llama", "from-llama-cpp", "tiny-q8_0@models-dir"}
    hub = entries["tiny-q8_0"]
    assert (hub.source, hub.repo, hub.arch) == ("huggingface", "org/Tiny-GGUF", "qwen2")
    assert hub.n_params > 0 and hub.size == hub.path.stat().st_size and hub.quant_types == ["F32"]
    assert hub.n_ctx_train == 1024 and hub.runnable is True and hub.reason is None
    assert entries["lm-llama"].source == "lmstudio" and entries["from-llama-cpp"].source == "llama.cpp"
    assert entries["tiny-q8_0@models-dir"].arch == "gemma3"


def test_hf_home_and_coli_models_dir_are_respected(home, tmp_path, monkeypatch):
    from colibri.library import scan

    hf_file(tmp_path / "hfhome" / "hub", "a/b", "x.gguf")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    one, two = tmp_path / "one", tmp_path / "two"
    for d in (one, two):
        d.mkdir()
        write_tiny(d / f"in-{d.name}.gguf")
    monkeypatch.setenv("COLI_MODELS_DIR", f"{one}{os.pathsep}{two}")
    assert sorted(e.id for e in scan()) == ["in-one", "in-two", "x"]
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))  # wins over HF_HOME
    assert sorted(e.id for e in scan()) == ["in-one", "in-two"]


def test_a_split_model_is_one_entry_with_a_named_reason(home, tmp_path):
    from colibri.library import scan

    d = tmp_path / "d"
    d.mkdir()
    for i in (1, 2):
        write_tiny(d / f"big-0000{i}-of-00002.gguf", family="qwen3")
    write_tiny(d / "gap-00001-of-00003.gguf")
    write_tiny(d / "gap-00003-of-00003.gguf")
    entries = {e.id: e for e in scan([d])}
    assert set(entries) == {"big", "gap"}
    big, gap = entries["big"], entries["gap"]
    assert len(big.parts) == 2 and big.size == sum(p.stat().st_size for p in big.parts)
    assert big.runnable is False and big.reason.startswith("split_gguf: 2 parts")
    assert gap.runnable is False and gap.reason.startswith("incomplete_split: part(s) 2 of 3")


def test_cli_list_check_add_plan_rm(home, tmp_path):
    env = {k: os.environ.get(k, "") for k in ("HOME", "COLI_DATA_DIR", "COLI_CACHE_DIR")}
    d = tmp_path / "d"
    d.mkdir()
    write_tiny(d / "good.gguf", family="qwen2")
    write_tiny(d / "alien.gguf", arch="mamba9")
    # the engine's binding check says no by name, without opening the model
    rows = {r["id"]: r for r in json.loads(run_coli("models", "list", "--json", "--models-dir", str(d),
                                                    env=env).stdout)["models"]}
    assert rows["good"]["runnable"] is True
    assert rows["alien"]["runnable"] is False and "architecture 'mamba9'" in rows["alien"]["reason"]
    done = run_coli("models", "list", "--json", "--check", "--models-dir", str(d), env=env)
    assert done.returncode == 0, done.stderr
    rows = {r["id"]: r for r in json.loads(done.stdout)["models"]}
    assert rows["good"]["runnable"] is True and rows["good"]["plan"]["placement"] == "resident"
    assert rows["alien"]["runnable"] is False and "architecture 'mamba9'" in rows["alien"]["reason"]
    assert "plan" not in rows["alien"]
    # the engine's verdict is remembered: a plain list knows it without loading again
    rows = {r["id"]: r for r in json.loads(run_coli("models", "list", "--json", "--models-dir", str(d),
                                                    env=env).stdout)["models"]}
    assert rows["good"]["runnable"] is True and rows["alien"]["runnable"] is False

    outside = tmp_path / "outside.gguf"
    write_tiny(outside, family="llama")
    added = run_coli("models", "add", str(outside), env=env)
    assert added.returncode == 0 and "outside: registered" in added.stdout
    plan = run_coli("models", "plan", "outside", "--json", env=env)
    assert plan.returncode == 0 and json.loads(plan.stdout)["arch"] == "llama"
    refused = run_coli("models", "plan", "alien", "--models-dir", str(d), env=env)
    assert refused.returncode == 1 and "cannot run on this build: unsupported: architecture" in refused.stderr
    gone = run_coli("models", "rm", "outside", env=env)
    assert gone.returncode == 0 and "unregistered" in gone.stdout and outside.is_file()  # never deleted
    other = run_coli("models", "rm", "good", "--models-dir", str(d), env=env)
    assert other.returncode == 1 and "is not colibri's" in other.stderr and (d / "good.gguf").is_file()
    unknown = run_coli("models", "plan", "nope", env=env)
    assert unknown.returncode == 2 and "no model 'nope' in the library" in unknown.stderr


def test_rm_deletes_colibris_own_file_only_with_yes(home, tmp_path):
    env = {k: os.environ.get(k, "") for k in ("HOME", "COLI_DATA_DIR", "COLI_CACHE_DIR")}
    own = Path(env["COLI_DATA_DIR"]) / "models" / "mine.gguf"
    own.parent.mkdir(parents=True)
    write_tiny(own)
    asked = run_coli("models", "rm", "mine", env=env)  # no terminal to ask on
    assert asked.returncode == 1 and "needs --yes" in asked.stderr and own.is_file()
    done = run_coli("models", "rm", "mine", "--yes", env=env)
    assert done.returncode == 0 and not own.exists()


def test_add_joins_a_split_model_into_colibris_folder(home, tmp_path):
    from tests.fixtures.split_gguf import split_gguf

    env = {k: os.environ.get(k, "") for k in ("HOME", "COLI_DATA_DIR", "COLI_CACHE_DIR")}
    d = tmp_path / "d"
    d.mkdir()
    whole = write_tiny(tmp_path / "Big.gguf", family="qwen3")
    parts = split_gguf(whole, 3, d)
    listed = {r["id"]: r for r in json.loads(run_coli("models", "list", "--json", "--models-dir", str(d),
                                                      env=env).stdout)["models"]}
    assert listed["big"]["reason"].startswith("split_gguf: 3 parts") and len(listed["big"]["parts"]) == 3
    done = run_coli("models", "add", str(parts[1]), env=env)
    assert done.returncode == 0, done.stderr
    joined = Path(env["COLI_DATA_DIR"]) / "models" / "Big.gguf"
    assert joined.read_bytes() == whole.read_bytes() and all(p.is_file() for p in parts)
    parts[2].unlink()
    gap = run_coli("models", "add", str(parts[0]), env=env)
    assert gap.returncode == 2 and "incomplete_split: part(s) 3 of 3" in gap.stderr


def test_an_older_revision_in_the_hf_cache_is_not_listed_twice(home):
    from colibri.library import scan

    hub = home / ".cache" / "huggingface" / "hub"
    new = hf_file(hub, "org/M-GGUF", "m-q4_k_m.gguf")
    repo = hub / "models--org--M-GGUF"
    old = repo / "snapshots" / "00old000"
    old.mkdir()
    (old / "m-q4_k_m.gguf").symlink_to(write_tiny(repo / "blobs" / "old-blob", family="llama"))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")  # main is the revision hf_file wrote
    entries = scan()
    assert [(e.id, e.path, e.arch) for e in entries] == [("m-q4_k_m", new, "qwen2")]
