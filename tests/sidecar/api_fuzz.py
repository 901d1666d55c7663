"""Schema-driven fuzzing of `coli serve` (schemathesis), shared by the CI test
(tests/sidecar/test_fuzz_api.py) and the soak (bench/fuzz_soak.sh, `python -m
tests.sidecar.api_fuzz --cases 5000`).

The requests come from the vendors' own OpenAPI schemas of the four operations
(tests/fixtures/vendor/schemas.json, `fuzz_openapi`: OpenAI's listModels,
createChatCompletion, createCompletion and Anthropic's messages_post): valid requests by the
vendor's schema, and a share of invalid ones. What colibri must do with each:

- never a 5xx, never a hang (every request answered within REQUEST_TIMEOUT);
- a 2xx is valid against the vendor's response schema: the JSON reply, or every event of a
  stream (`x-stream-event`), and a stream ends as the vendor's do;
- a 4xx is a named error in the endpoint's envelope (Anthropic's `ErrorResponse` schema on
  /v1/messages; OpenAI's `{"error": {"message", "type", "code"}}` elsewhere). A request the
  vendor's schema allows but colibri refuses by name (serve-api.md: images, n > 1 ...) is
  not a failure.

Where the vendor's API says more than its schema, the check follows the API (DEVIATIONS,
STREAM_EVENT): an echoed prompt's first token has a null log probability, and a legacy
completions chunk before the last has `finish_reason: null` (and `usage: null` with
`include_usage`), as the vendor's own stream example and `stream_options` text show.

Seven cases in eight keep only the top-level fields the vendor names (JSON Schema leaves the
objects open, and a made-up field is refused first). `max_tokens` (and
`max_completion_tokens`) are overridden to 1-3 tokens when the generated
value is a positive integer, and `model` is the served model's id except for one case in
eight, so the cases exercise the server, not the model's speed or the 404 path.
"""
from __future__ import annotations

import collections
import json
import os
import sys
import time
from functools import lru_cache
from pathlib import Path

REQUEST_TIMEOUT = 60.0
OPENAI_ERROR_KEYS = {"message", "type"}


@lru_cache(maxsize=1)
def document() -> dict:
    from tests.fixtures.vendor.extract import load

    return load()["fuzz_openapi"]


def json_schema(node: object) -> object:
    """An OpenAPI schema as JSON Schema 2020-12: `nullable: true` (OpenAPI 3.0's word, which
    the vendors' 3.1 documents still use) becomes a null branch."""
    if isinstance(node, list):
        return [json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: json_schema(v) for k, v in node.items() if k not in ("nullable", "discriminator")}
    if node.get("nullable") is True:
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = out["enum"] + [None]
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list):
            out["type"] = kind + (["null"] if "null" not in kind else [])
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


# Where colibri's contract (serve-api.md) says more than the vendor's schema, and the vendor's
# own API does the same: the legacy `logprobs` of an echoed prompt has no log probability for
# its first token, and a non-finite value "serializes as JSON null, never a clamped number"
# (OpenAI's API sends null there too; its schema does not say so).
DEVIATIONS = {
    ("CreateCompletionResponse", "choices", "logprobs", "token_logprobs"): {"items": {"type": ["number", "null"]}},
    ("CreateCompletionResponse", "choices", "logprobs", "top_logprobs"):
        {"items": {"anyOf": [{"type": "object", "additionalProperties": {"type": ["number", "null"]}},
                             {"type": "null"}]}},
}


# The legacy completions stream is documented as a series of CreateCompletionResponse objects,
# whose schema has no room for what a chunk before the last carries and the vendor's own
# documents show: `finish_reason: null` (the stream example of POST /completions), and
# `usage: null` on every chunk while `stream_options.include_usage` is on (that option's
# description). The chunk schema colibri's completion stream is checked against says so.
COMPLETION_CHUNK = "x-CreateCompletionResponseChunk"
STREAM_EVENT = {"/v1/completions": f"#/components/schemas/{COMPLETION_CHUNK}"}


def completion_chunk(schemas: dict) -> dict:
    chunk = json.loads(json.dumps(schemas["CreateCompletionResponse"]))
    reason = chunk["properties"]["choices"]["items"]["properties"]["finish_reason"]
    reason["type"] = [reason["type"], "null"]
    reason["enum"] = reason["enum"] + [None]
    chunk["properties"]["usage"] = {"anyOf": [chunk["properties"]["usage"], {"type": "null"}]}
    return chunk


def with_deviations(schemas: dict) -> dict:
    schemas = json.loads(json.dumps(schemas))
    for (name, *fields), patch in DEVIATIONS.items():
        node = schemas[name]
        for field in fields[:-1]:  # down through arrays' items and nullable objects
            node = node["properties"][field]
            node = node.get("items", node)
            node = next((b for b in node.get("anyOf", []) if b.get("type") == "object"), node)
        node["properties"][fields[-1]].update(patch)
    schemas[COMPLETION_CHUNK] = completion_chunk(schemas)
    return schemas


@lru_cache(maxsize=None)
def validator(ref: str):
    """A jsonschema_rs validator of the schema `ref` points at, in the fuzz document (with
    DEVIATIONS)."""
    import jsonschema_rs

    components = json_schema(document()["components"])
    components["schemas"] = with_deviations(components["schemas"])
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": ref, "components": components}
    return jsonschema_rs.validator_for(root)


def schema_problems(ref: str, value: object) -> list[str]:
    return [f"{e.instance_path}: {e.message}"[:300] for e in validator(ref).iter_errors(value)][:5]


def operation(path: str) -> dict:
    ops = document()["paths"][path]
    return ops[next(iter(ops))]


class Tally:
    """Cases by operation and status, and every problem found."""

    def __init__(self) -> None:
        self.by_status: collections.Counter = collections.Counter()
        self.codes: collections.Counter = collections.Counter()  # (path, status, error code) of the 4xx
        self.problems: list[str] = []
        self.started: float | None = None  # at the first case
        self.slowest = 0.0

    @property
    def cases(self) -> int:
        return sum(self.by_status.values())

    def summary(self) -> str:
        per_op = collections.Counter()
        per_class = collections.Counter()
        for (path, status), n in self.by_status.items():
            per_op[path] += n
            per_class[f"{status // 100}xx"] += n
        wall = time.monotonic() - self.started if self.started is not None else 0.0
        return (f"{self.cases} cases in {wall:.0f} s ({self.cases / max(wall, 1e-9):.1f}/s; slowest "
                f"{self.slowest:.1f} s): {dict(sorted(per_class.items()))}, by operation {dict(per_op)}, "
                f"{len(self.problems)} problems")

    def statuses(self) -> dict:
        return {f"{p} {s}": n for (p, s), n in sorted(self.by_status.items())}


def tweak(case, model_id: str) -> None:
    """Tiny budgets and (mostly) the served model, on a generated case."""
    body = case.body
    if not isinstance(body, dict):
        return
    # JSON Schema leaves objects open, so most generated bodies carry a made-up top-level
    # field, a named 400 (`unsupported_parameter`) before anything else is read: seven cases
    # in eight keep only the fields the vendor names
    if len(body) % 8:
        for key in [k for k in body if k not in request_fields(case.path)]:
            del body[key]
    model = body.get("model")
    if not (isinstance(model, str) and model and sum(map(ord, model)) % 8 == 0):
        body["model"] = model_id
    for key in ("max_tokens", "max_completion_tokens"):
        v = body.get(key)
        if isinstance(v, float) and v.is_integer() and v > 0:  # JSON Schema's integer: 7.0 is one
            body[key] = float(1 + int(v) % 3)
        elif isinstance(v, int) and not isinstance(v, bool) and v > 0:
            body[key] = 1 + v % 3
    if case.path in ("/v1/messages",) and "max_tokens" not in body:
        body["max_tokens"] = 2


def sse_payloads(text: str) -> tuple[list[tuple[str | None, str]], str | None]:
    """(event name, data) of each block of an SSE body, and what is wrong with its framing."""
    if not text.endswith("\n\n"):
        return [], f"the stream does not end with a blank line: {text[-200:]!r}"
    out = []
    for block in text.split("\n\n")[:-1]:
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line.startswith(":") or not line:
                continue
            else:
                return out, f"a line that is not SSE: {line[:200]!r}"
        if data:
            out.append((name, "\n".join(data)))
    return out, None


def check_reply(path: str, status: int, headers: dict, text: str, body: object) -> list[str]:
    """What is wrong with one reply (nothing: [])."""
    op = operation(path)
    ctype = headers.get("content-type", "")
    if status >= 500:
        return [f"{status} {text[:500]}"]
    if 200 <= status < 300:
        if ctype.startswith("text/event-stream"):
            return check_stream(path, op, text)
        if not ctype.startswith("application/json"):
            return [f"{status} with content-type {ctype!r}"]
        try:
            reply = json.loads(text)
        except ValueError:
            return [f"{status} whose body is not JSON: {text[:200]!r}"]
        ref = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        probs = schema_problems(ref, reply)
        if isinstance(body, dict) and body.get("stream") is True and path != "/v1/models":
            probs.append("a stream was asked for and a JSON reply came")
        return probs
    if 400 <= status < 500:
        try:
            err = json.loads(text)
        except ValueError:
            return [f"{status} whose body is not JSON: {text[:200]!r}"]
        if path == "/v1/messages":
            ref = op["responses"]["4XX"]["content"]["application/json"]["schema"]["$ref"]
            return schema_problems(ref, err)
        e = err.get("error") if isinstance(err, dict) else None
        if not isinstance(e, dict) or not OPENAI_ERROR_KEYS <= set(e) or not isinstance(e.get("message"), str):
            return [f"{status} not in OpenAI's error envelope: {text[:300]}"]
        return []
    return [f"unexpected status {status}: {text[:200]}"]


def check_stream(path: str, op: dict, text: str) -> list[str]:
    events, problem = sse_payloads(text)
    if problem:
        return [problem]
    ref = STREAM_EVENT.get(path, op["x-stream-event"]["$ref"])
    probs = []
    if path == "/v1/messages":
        names = [n for n, _ in events]
        if not names or names[0] != "message_start" or names[-1] not in ("message_stop", "error"):
            probs.append(f"event order: {names[:3]} ... {names[-3:]}")
        for name, data in events:
            payload = json.loads(data)
            if name == "error":
                probs += schema_problems("#/components/schemas/anthropic.ErrorResponse", payload)
            elif name != "ping" or payload.get("type") != "ping":
                if payload.get("type") != name:
                    probs.append(f"event {name} carries type {payload.get('type')}")
                probs += schema_problems(ref, payload)
        return probs
    if not events or events[-1][1] != "[DONE]":
        probs.append(f"no [DONE] at the end: {text[-200:]!r}")
    for _, data in events[:-1]:
        payload = json.loads(data)
        if "error" in payload and "choices" not in payload:  # an error after the headers went out
            probs.append(f"an error inside the stream: {data[:300]}")
            continue
        probs += schema_problems(ref, payload)
    return probs


def named_fields(node: object, seen: frozenset = frozenset()) -> set[str]:
    """The property names an object schema names, through $ref and allOf/anyOf/oneOf."""
    if not isinstance(node, dict):
        return set()
    out = set(node.get("properties", {}))
    ref = node.get("$ref")
    if isinstance(ref, str) and ref not in seen:
        out |= named_fields(document()["components"]["schemas"][ref.rsplit("/", 1)[-1]], seen | {ref})
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(key, []):
            out |= named_fields(sub, seen)
    return out


@lru_cache(maxsize=None)
def request_fields(path: str) -> frozenset:
    body = operation(path).get("requestBody")
    return frozenset(named_fields(body["content"]["application/json"]["schema"]) if body else ())


def make_schema(cases: int, negative_share: bool = True):
    """The schemathesis schema of the fuzz document, generating about
    `cases` cases per operation with a body (positive and, with negative_share, negative data)."""
    import schemathesis
    from schemathesis.generation import GenerationMode

    schema = schemathesis.openapi.from_dict(document())
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE] if negative_share else [GenerationMode.POSITIVE]
    schema.config.generation.update(modes=modes, max_examples=cases, deterministic=True, database="none",
                                    allow_x00=False)
    return schema


def error_code(text: str) -> str:
    try:
        err = json.loads(text)["error"]
        return str(err.get("code") or err.get("type"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return "?"


def run_case(case, base: str, model_id: str, tally: Tally) -> list[str]:
    """Send one case, check its reply, count it; the problems found (also kept in the tally)."""
    tweak(case, model_id)
    t0 = time.monotonic()
    if tally.started is None:
        tally.started = t0
    try:
        resp = case.call(base_url=base, timeout=REQUEST_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - a hang (timeout) or a dropped connection is a failure
        problems = [f"no answer: {type(exc).__name__}: {exc}"[:500]]
        tally.by_status[(case.path, 0)] += 1
    else:
        took = time.monotonic() - t0
        tally.slowest = max(tally.slowest, took)
        tally.by_status[(case.path, resp.status_code)] += 1
        headers = {k.lower(): (v[0] if isinstance(v, list) else v) for k, v in resp.headers.items()}
        problems = check_reply(case.path, resp.status_code, headers, resp.text, case.body)
        if 400 <= resp.status_code < 500:
            tally.codes[(case.path, resp.status_code, error_code(resp.text))] += 1
    if problems:
        body = json.dumps(case.body)[:1500] if isinstance(case.body, (dict, list)) else repr(case.body)[:300]
        tally.problems.append(f"{case.method} {case.path} {body}\n    " + "\n    ".join(problems))
    return problems


def main(argv: list[str]) -> int:
    """The soak: `python -m tests.sidecar.api_fuzz --cases 5000 [--model PATH]` against a
    fresh `coli serve`, every operation, reported as one line per figure."""
    import argparse

    from hypothesis import HealthCheck, given, settings

    from tests.sidecar.serve_support import ServerProcess

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=5000, help="cases in all (split over the operations with a body)")
    ap.add_argument("--model", help="the GGUF to serve (default: the default model with Qwen3's template)")
    ap.add_argument("--seed-offset", type=int, default=0, help="not deterministic when non-zero")
    args = ap.parse_args(argv)
    model = args.model or str(served_model())
    schema = make_schema(args.cases)
    tally = Tally()
    per_op = -(-args.cases // 3)
    with ServerProcess(SERVER_ARGS + ["--model", model], env={"COLI_LOG_LEVEL": "warning"}) as srv:
        for op in schema.get_all_operations():
            operation_ = op.ok()

            @settings(max_examples=per_op if operation_.method.upper() == "POST" else 25, deadline=None,
                      suppress_health_check=list(HealthCheck), database=None,
                      derandomize=args.seed_offset == 0, print_blob=False)
            @given(case=operation_.as_strategy())
            def one(case):
                run_case(case, srv.base, srv.model_id, tally)

            one()
            print(f"{operation_.method.upper()} {operation_.path}: {tally.summary()}", flush=True)
        alive = srv.proc.poll() is None
    print("statuses:", json.dumps(tally.statuses()))
    print("4xx codes:", json.dumps({f"{p} {s} {c}": n for (p, s, c), n in tally.codes.most_common()}))
    for p in tally.problems[:50]:
        print("PROBLEM", p)
    print("RESULT", tally.summary(), "server alive" if alive else "SERVER DIED")
    return 0 if not tally.problems and alive else 1


SERVER_ARGS = ["--kv-slots", "2", "--ctx", "512", "--max-tokens", "4"]


def served_model() -> Path:
    """The default model (Gemma 3 270M) with Qwen3's chat template, so tool requests are
    rendered and parsed too (the copy tests/sidecar/test_serve_tools.py serves)."""
    from colibri.models import embedded_model_path
    from tests.sidecar.family_templates import QWEN3, with_chat_template

    return with_chat_template(embedded_model_path(progress=False), QWEN3, "qwen3-template")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
