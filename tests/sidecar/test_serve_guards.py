"""What a request meets before any work, in process on the real engine (the default model):
bodies no field can hold, each a named 4xx on every generation route (OpenAI chat and
completions, Responses, Anthropic Messages); and nothing of it admitted to a slot."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from colibri.serve_config import ServeConfig, cors_origins_from
from tests.sidecar.serve_support import close_served, open_served, run_app

MODEL = "gemma-3-270m"
CFG = ServeConfig(model_id=MODEL, kv_slots=1, ctx=256, threads=2, kv_persist=False,
                  cors_origins=cors_origins_from([], 8000))
ROUTES = {  # a valid body of each route, as JSON text with a hole ("@") for the bad part
    "/v1/chat/completions": '{"model": "gemma-3-270m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}], "x": @}',
    "/v1/completions": '{"model": "gemma-3-270m", "max_tokens": 1, "prompt": "hi", "x": @}',
    "/v1/responses": '{"model": "gemma-3-270m", "max_output_tokens": 16, "input": "hi", "x": @}',
    "/v1/messages": '{"model": "gemma-3-270m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}], "x": @}',
}
BAD = [  # (name, what fills the hole, the code)
    ("5000-digit integer", "1" * 5000, "invalid_number"),
    ("negative 5000-digit integer", "-" + "9" * 5000, "invalid_number"),
    ("1e999", "1e999", "invalid_number"),
    ("-1e999", "-1e999", "invalid_number"),
    ("NaN", "NaN", "invalid_number"),
    ("Infinity", "Infinity", "invalid_number"),
    ("-Infinity", "-Infinity", "invalid_number"),
    ("nesting 200 deep", "[" * 200 + "]" * 200, "invalid_json"),
    ("nesting 100000 deep", "[" * 100000 + "]" * 100000, "invalid_json"),
    ("objects 200 deep", '{"a": ' * 200 + "1" + "}" * 200, "invalid_json"),
    ("a duplicate key", '{"k": 1, "k": 2}', "duplicate_key"),
    ("a duplicate top-level key", '1, "model": "gemma-3-270m"', "duplicate_key"),
]


@pytest.fixture(scope="module")
def served(default_model):
    s = open_served(CFG, default_model)
    yield s
    close_served(s)


def post_raw(served, path: str, data: bytes, headers: dict, cfg=CFG):
    async def body(c, served):
        r = await c.post(path, data=data, headers=headers)
        health = await (await c.get("/health")).json()
        return r.status, await r.text(), health["scheduler"]["admitted"]

    return run_app(served, body, cfg)


def error_code(path: str, text: str) -> str | None:
    """The code of an error in either envelope (Anthropic's carries it in the message)."""
    err = json.loads(text)
    if path == "/v1/messages":
        assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
        return err["error"]["message"].rsplit("[", 1)[-1].rstrip("]")
    return err["error"]["code"]


@pytest.mark.parametrize("path", list(ROUTES))
def test_a_valid_body_is_served(served, path):
    status, text, admitted = post_raw(served, path, ROUTES[path].replace("@", "1").replace(', "x": 1', "").encode(),
                                      {"Content-Type": "application/json"})
    assert status == 200, text
    assert admitted == 1


@pytest.mark.parametrize("name, hole, code", BAD, ids=[b[0] for b in BAD])
@pytest.mark.parametrize("path", list(ROUTES))
def test_every_bad_body_is_a_named_400(served, path, name, hole, code):
    status, text, admitted = post_raw(served, path, ROUTES[path].replace("@", hole).encode(),
                                      {"Content-Type": "application/json"})
    assert status == 400, text[:300]
    assert error_code(path, text) == code, text[:300]
    assert admitted == 0


def test_the_messages_name_what_is_wrong(served):
    cases = {"1" * 5000: "an integer of 5000 digits; the limit is 4300", "1e999": "1e999 is out of range",
             "NaN": "NaN is not JSON", '{"k": 1, "k": 2}': "the key 'k' appears twice",
             "[" * 200 + "]" * 200: "more than 128 levels deep"}
    for hole, words in cases.items():
        _, text, _ = post_raw(served, "/v1/chat/completions", ROUTES["/v1/chat/completions"].replace("@", hole).encode(),
                              {"Content-Type": "application/json"})
        assert words in json.loads(text)["error"]["message"]


def test_numbers_a_real_request_carries_still_parse(served):
    """A tool schema with 2^63 and a float exponent, nested 12 deep, is not refused."""
    deep = {"type": "object", "properties": {}}
    node = deep
    for i in range(5):
        node["properties"][f"p{i}"] = {"type": "object", "properties": {}, "maximum": 9223372036854775808,
                                       "multipleOf": 1.5e-300}
        node = node["properties"][f"p{i}"]
    payload = {"model": MODEL, "max_tokens": 1, "seed": 18446744073709551615,
               "messages": [{"role": "user", "content": "hi"}], "temperature": 1e-3}
    status, text, admitted = post_raw(served, "/v1/chat/completions", json.dumps(payload).encode(),
                                      {"Content-Type": "application/json"})
    assert status == 200 and admitted == 1, text
    from colibri.api.body import parse_json
    assert parse_json(json.dumps(deep))["properties"]["p0"]["maximum"] == 2 ** 63
