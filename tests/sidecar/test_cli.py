"""The `coli` command line, run as a real child process."""
from __future__ import annotations

import json
from tests.conftest import run_coli


def test_version():
    r = run_coli("--version")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("coli ")
    assert lines[1].startswith("engine ") and "-O3" in lines[1]
    assert lines[2].startswith("cpu:")


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
