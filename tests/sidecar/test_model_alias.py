"""--model-alias / COLI_MODEL_ALIAS: more names for the one loaded model, on the real server
and the real engine (Qwen2.5-Coder 0.5B Instruct). A request naming an alias is served as
the model and its reply names the served id, as every reply does; /v1/models lists the
model's own id first, then one card per alias; the 404 names the id and the option."""
from __future__ import annotations

import json

import anthropic
import openai
import pytest

from colibri.cli import build_parser
from colibri.commands.serve import config_from_args
from colibri.errors import ColiError
from tests.conftest import real_model_path
from tests.sidecar.serve_support import ServerProcess

MODEL = "qwen2.5-coder-0.5b-instruct"
HELLO = [{"role": "user", "content": "Say hi."}]


def config(argv: list[str], monkeypatch, env: dict[str, str] | None = None):
    for name in ("COLI_MODEL_ALIAS", "COLI_MODELS_DIR", "COLI_UPSTREAM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    return config_from_args(build_parser().parse_args(["serve", *argv]))


def test_aliases_from_flags_comma_lists_and_the_variable(monkeypatch):
    assert config([], monkeypatch).model_aliases == ()
    assert config(["--model-alias", "default", "--model-alias", "gpt-4o, default,qwen"],
                  monkeypatch).model_aliases == ("default", "gpt-4o", "qwen")
    assert config([], monkeypatch, {"COLI_MODEL_ALIAS": "default,,claude-sonnet-4-5"}).model_aliases == \
        ("default", "claude-sonnet-4-5")
    # the flag wins over the variable, as for every setting
    assert config(["--model-alias", "x"], monkeypatch, {"COLI_MODEL_ALIAS": "y"}).model_aliases == ("x",)


def test_aliases_are_refused_where_there_is_no_one_loaded_model(monkeypatch, tmp_path):
    with pytest.raises(ColiError, match="URL#ALIAS"):
        config(["--model-alias", "x", "--upstream", "http://127.0.0.1:9"], monkeypatch)
    with pytest.raises(ColiError, match="--models-dir"):
        config(["--model-alias", "x", "--models-dir", str(tmp_path)], monkeypatch)


@pytest.fixture(scope="module")
def aliased():
    path = real_model_path(MODEL)
    with ServerProcess(["--model", str(path), "--ctx", "2048", "--max-tokens", "8", "--no-kv-persist",
                        "--model-alias", "default,gpt-4o"], env={"COLI_MODEL_ALIAS": ""}) as srv:
        yield srv


def test_an_alias_is_served_as_the_model_on_chat_completions_and_messages(aliased):
    assert aliased.model_id == MODEL
    oai = openai.OpenAI(base_url=aliased.base + "/v1", api_key="local", max_retries=0)
    direct = oai.chat.completions.create(model=MODEL, messages=HELLO, temperature=0, max_tokens=8)
    for name in ("default", "gpt-4o"):
        r = oai.chat.completions.create(model=name, messages=HELLO, temperature=0, max_tokens=8)
        assert r.model == MODEL  # the served id, as every reply names it
        assert r.choices[0].message.content == direct.choices[0].message.content
    stream = oai.chat.completions.create(model="default", messages=HELLO, temperature=0, max_tokens=8, stream=True)
    chunks = list(stream)
    assert {c.model for c in chunks} == {MODEL}
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == direct.choices[0].message.content
    legacy = oai.completions.create(model="gpt-4o", prompt="def add(a, b):", temperature=0, max_tokens=4)
    assert legacy.model == MODEL and legacy.choices[0].text

    ant = anthropic.Anthropic(base_url=aliased.base, api_key="local", max_retries=0)
    msg = ant.messages.create(model="default", max_tokens=8, messages=HELLO, extra_body={"temperature": 0})
    assert msg.model == MODEL and msg.content[0].text == direct.choices[0].message.content


def test_models_lists_the_id_first_then_each_alias(aliased):
    status, _, raw = aliased.get("/v1/models")
    data = json.loads(raw)["data"]
    assert status == 200 and [d["id"] for d in data] == [MODEL, "default", "gpt-4o"]
    assert "root" not in data[0] and {d["root"] for d in data[1:]} == {MODEL}
    assert data[1]["context_length"] == data[0]["context_length"] == 2048
    status, _, raw = aliased.get("/v1/models/default")
    assert status == 200 and json.loads(raw)["id"] == "default"
    status, _, raw = aliased.get("/v1/models", headers={"anthropic-version": "2023-06-01"})
    page = json.loads(raw)
    assert [d["id"] for d in page["data"]] == [MODEL, "default", "gpt-4o"] and page["last_id"] == "gpt-4o"


def test_an_unknown_name_is_a_404_naming_the_id_the_aliases_and_the_option(aliased):
    status, _, body = aliased.post("/v1/chat/completions", {"model": "llama3", "messages": HELLO})
    assert status == 404 and body["error"]["code"] == "model_not_found" and body["error"]["param"] == "model"
    message = body["error"]["message"]
    assert f"this server serves {MODEL!r} (also as 'default', 'gpt-4o')" in message
    assert "--model-alias NAME" in message and "COLI_MODEL_ALIAS" in message
    status, _, body = aliased.post("/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 4,
                                                    "messages": HELLO})
    assert status == 404 and body["error"]["type"] == "not_found_error" and "--model-alias" in body["error"]["message"]


def test_star_accepts_any_name_and_none(default_model):
    with ServerProcess(["--max-tokens", "2", "--no-kv-persist"], env={"COLI_MODEL_ALIAS": "*"}) as srv:
        for payload in ({"model": "anything"}, {"model": ""}, {}):
            status, _, body = srv.post("/v1/completions", {**payload, "prompt": "Hello", "temperature": 0})
            assert status == 200 and body["model"] == srv.model_id, body
        status, _, raw = srv.get("/v1/models")
        assert [d["id"] for d in json.loads(raw)["data"]] == [srv.model_id]  # '*' is no name to list
