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


# ---- browser origins and the content type -------------------------------------------------

CHAT = json.dumps({"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}).encode()


def requests(served, calls, cfg=CFG):
    """(status, headers, text) of each (method, path, data, headers) in turn, and the requests
    admitted to a slot in all."""
    async def body(c, served):
        out = []
        for method, path, data, headers in calls:
            r = await c.request(method, path, data=data, headers=headers)
            out.append((r.status, r.headers, await r.text()))
        return out, (await (await c.get("/health")).json())["scheduler"]["admitted"]

    return run_app(served, body, cfg)


def test_a_foreign_origin_is_a_403_before_any_work(served):
    calls = [("POST", path, CHAT if path != "/v1/messages" else CHAT, {"Origin": origin, "Content-Type": ctype})
             for path in ("/v1/chat/completions", "/v1/messages")
             for origin in ("http://evil.example", "null", "http://localhost:9999", "http://127.0.0.1:1")
             for ctype in ("text/plain", "application/json")]
    calls += [("GET", path, None, {"Origin": "http://evil.example"}) for path in
              ("/v1/models", "/experts", "/profile", "/events", "/health", "/metrics")]
    calls += [("OPTIONS", "/v1/chat/completions", None, {"Origin": "http://evil.example",
                                                        "Access-Control-Request-Method": "POST"})]
    out, admitted = requests(served, calls)
    for (method, path, _, headers), (status, hdrs, text) in zip(calls, out):
        assert status == 403, (method, path, headers, status, text[:200])
        assert "Access-Control-Allow-Origin" not in hdrs
        if path != "/v1/messages":
            assert json.loads(text)["error"]["code"] == "forbidden"
    assert "--cors-origin +http://evil.example" in out[0][2]
    assert admitted == 0


def test_cross_site_loads_without_an_origin_are_refused_on_api_and_feed_paths(served):
    """What an <img>, <script> or <iframe> on another site sends: no Origin, Sec-Fetch-Site."""
    calls = [("GET", path, None, {"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"})
             for path in ("/experts", "/events", "/profile", "/v1/models", "/health", "/metrics")
             for site in ("cross-site", "same-site")]
    allowed = [("GET", "/experts", None, {"Sec-Fetch-Site": site}) for site in ("same-origin", "none")]
    allowed += [("GET", "/", None, {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})]  # the dashboard
    out, _ = requests(served, calls + allowed)
    assert [s for s, _, _ in out[:len(calls)]] == [403] * len(calls)
    assert [s for s, _, _ in out[len(calls):]] == [200, 200, 200], [t[:100] for _, _, t in out[len(calls):]]


def test_allowed_origins_are_served(served):
    """The server's own origin (whatever its port: the dashboard), the CORS list (Vite, Tauri,
    an added one), and no Origin at all (every SDK, curl)."""
    cfg = replace(CFG, cors_origins=cors_origins_from(["+https://ui.example"], 8000))

    async def body(c, served):
        own = f"http://{c.server.host}:{c.server.port}"
        out = {}
        for origin in (own, "http://localhost:5173", "tauri://localhost", "http://tauri.localhost",
                       "https://ui.example", "HTTPS://UI.EXAMPLE/", None):
            headers = {"Content-Type": "application/json", **({"Origin": origin} if origin else {})}
            r = await c.post("/v1/chat/completions", data=CHAT, headers=headers)
            out[origin] = (r.status, r.headers.get("Access-Control-Allow-Origin"))
            await r.read()
        return own, out

    own, out = run_app(served, body, cfg)
    assert all(status == 200 for status, _ in out.values()), out
    assert out[own][1] == own and out["tauri://localhost"][1] == "tauri://localhost" and out[None][1] is None


@pytest.mark.parametrize("ctype", ["application/json", "application/json; charset=utf-8", "Application/JSON",
                                   "application/json;charset=UTF-8"])
def test_json_content_types_are_taken(served, ctype):
    (status, _, text), = requests(served, [("POST", "/v1/chat/completions", CHAT, {"Content-Type": ctype})])[0]
    assert status == 200, text


@pytest.mark.parametrize("ctype", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=x", "application/jsonx", None])
@pytest.mark.parametrize("path", list(ROUTES))
def test_a_body_not_sent_as_json_is_a_415(served, path, ctype):
    headers = {"Content-Type": ctype} if ctype else {}
    calls = [("POST", path, ROUTES[path].replace(', "x": @', "").encode(), headers)]
    (status, _, text), = requests(served, calls)[0]
    assert status == 415, text
    if path == "/v1/messages":
        err = json.loads(text)["error"]
        assert err["type"] == "invalid_request_error" and err["message"].endswith("[unsupported_media_type]")
    else:
        err = json.loads(text)["error"]
        assert err["code"] == "unsupported_media_type" and err["type"] == "invalid_request_error"
    assert "add -H 'Content-Type: application/json'" in err["message"]
