"""The `coli` command line, run as a real child process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import run_coli


def test_version():
    r = run_coli("--version")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("coli ")
    assert lines[1].startswith("engine ") and "-O3" in lines[1]
    assert lines[2].startswith("cpu:")


def test_cpu_isa_hides_the_features_above_it():
    """COLI_CPU_ISA=avx2: the engine as on an AVX2-only CPU (no AVX-512, no AVX-VNNI; the AVX2 set is the widest,
    so `auto` picks it); scalar hides AVX too; a name it does not know hides nothing."""
    full = run_coli("--version").stdout.splitlines()[2]
    if " avx2" not in full:
        return  # nothing to hide on this CPU
    avx2 = run_coli("--version", env={"COLI_CPU_ISA": "avx2"}).stdout.splitlines()[2]
    assert " avx2" in avx2 and "avx512" not in avx2 and "avxvnni" not in avx2 and avx2.endswith("(COLI_CPU_ISA=avx2)")
    scalar = run_coli("--version", env={"COLI_CPU_ISA": "scalar"}).stdout.splitlines()[2]
    assert " avx" not in scalar and "fma" not in scalar
    assert run_coli("--version", env={"COLI_CPU_ISA": "bogus"}).stdout.splitlines()[2].startswith(full)
    probe = "from colibri._engine import ffi, lib; print(ffi.string(lib.colibri_kernel_isa()).decode())"
    isa = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={**os.environ, "COLI_CPU_ISA": "avx2"}).stdout.split()[0]
    assert isa == "avx2"


def test_help_lists_subcommands():
    r = run_coli("--help")
    assert r.returncode == 0
    for name in ("serve", "web", "chat", "generate", "tokenize", "perplexity", "plan", "models"):
        assert name in r.stdout, name


def test_no_command_is_left_unbuilt():
    r = run_coli("chat", "--help")
    assert r.returncode == 0 and "--url" in r.stdout
    assert "not built" not in run_coli("--help").stdout


def test_models_info_default_json(default_model):
    r = run_coli("models", "info", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    for key in ("arch", "n_tensors", "n_params", "n_layer", "n_embd", "n_expert", "n_expert_used", "vocab_size",
                "tensor_types", "has_chat_template"):
        assert key in info, key
    assert info["arch"] == "gemma3" and info["n_tensors"] == 236
    assert info["path"] == str(default_model)


def test_models_info_text(default_model):
    r = run_coli("models", "info", str(default_model))
    assert r.returncode == 0, r.stderr
    assert "gemma3" in r.stdout and "Q4_K" in r.stdout and "268,098,176" in r.stdout


def test_models_info_corrupt_file(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    r = run_coli("models", "info", str(bad))
    assert r.returncode == 1
    assert "truncated" in r.stderr and "Traceback" not in r.stderr


def test_models_info_missing_file(tmp_path):
    r = run_coli("models", "info", str(tmp_path / "nope.gguf"))
    assert r.returncode == 2
    assert "not found" in r.stderr


def test_coli_model_env(default_model, tmp_path):
    r = run_coli("models", "path", env={"COLI_MODEL": str(default_model)})
    assert r.returncode == 0 and r.stdout.strip() == str(default_model)


def test_default_model_is_assembled_verified_and_reused(tmp_path, default_model):
    env = {"COLI_DATA_DIR": str(tmp_path / "data")}
    r = run_coli("models", "path", env=env)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "data" / "models" / default_model.name
    assert r.stdout.strip() == str(path)
    assert "Assembling gemma-3-270m" in r.stderr and "100%" in r.stderr
    assert path.read_bytes() == default_model.read_bytes()
    # second use: no work, no output
    r = run_coli("models", "path", env=env)
    assert r.returncode == 0 and r.stderr == ""
    # a damaged file is noticed (size/mtime changed) and assembled again
    with path.open("r+b") as f:
        f.seek(1000)
        f.write(b"\0\1\2\3")
    r = run_coli("models", "path", env=env)
    assert r.returncode == 0, r.stderr
    assert "Assembling" in r.stderr
    assert path.read_bytes() == default_model.read_bytes()
    assert not list(path.parent.glob("*.part-*")), "temporary file left behind"
