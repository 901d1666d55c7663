"""The user's default model: Qwen2.5-Coder 0.5B Instruct, an instruct model with a chat
template, fetched on first use. The rest of the suite pins Gemma 3 270M
(COLI_DEFAULT_MODEL in tests/conftest.py); here that pin is lifted."""
from __future__ import annotations

import json

import pytest

from colibri import models
from tests.conftest import real_model_path, run_coli
from tests.sidecar.serve_support import ServerProcess

DEFAULT = "qwen2.5-coder-0.5b-instruct"


@pytest.fixture
def user_env(monkeypatch):
    """The environment a user has: no COLI_DEFAULT_MODEL, no COLI_MODEL."""
    monkeypatch.delenv("COLI_DEFAULT_MODEL", raising=False)
    monkeypatch.delenv("COLI_MODEL", raising=False)


def test_the_default_is_an_instruct_model_with_a_chat_template_and_tools(user_env):
    assert models.DEFAULT_MODEL_ID == DEFAULT
    path = real_model_path(DEFAULT)  # pulled once into the models folder (scripts/test.sh does it first)
    r = run_coli("models", "info", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["path"] == str(path) and info["arch"] == "qwen2" and info["has_chat_template"]
    assert r.stderr == ""  # already pulled: no download, no output


def test_gemma_stays_available_by_name():
    r = run_coli("models", "path", "gemma-3-270m")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(models.embedded_model_path(progress=False))


def test_a_bad_default_is_a_named_error():
    r = run_coli("models", "path", env={"COLI_DEFAULT_MODEL": "no-such-model"})
    assert r.returncode == 2 and "COLI_DEFAULT_MODEL='no-such-model' is not a known model" in r.stderr
    assert "Traceback" not in r.stderr


def test_serve_with_no_model_chats_on_the_default(user_env):
    real_model_path(DEFAULT)
    with ServerProcess(["--ctx", "1024"]) as srv:
        assert srv.model_id == DEFAULT
        status, _, reply = srv.post("/v1/chat/completions", {
            "model": DEFAULT, "max_tokens": 16, "temperature": 0,
            "messages": [{"role": "user", "content": "What is 2 + 3? Answer with the number only."}]})
        assert status == 200, reply
        assert reply["choices"][0]["message"]["content"].strip() == "5", reply
