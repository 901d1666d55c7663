"""Reading a request body as one JSON object, refusing each way it can be wrong by name:
not declared as JSON (415), too large, empty, not UTF-8, not JSON, not an object, a number
no field can hold (an integer of thousands of digits, 1e999, NaN or Infinity), nesting
deeper than any request needs, a key given twice in one object, or a lone surrogate (legal
in JSON's \\u escapes, but not text the tokenizer can take)."""
from __future__ import annotations

import json
import math

from aiohttp import web

from colibri.api import connections
from colibri.api.errors import ApiError, bad_request

JSON_TYPES = ("application/json",)
MAX_INT_DIGITS = 4300  # Python's default int-string limit, enforced here whatever the interpreter allows
MAX_DEPTH = 128  # arrays and objects inside each other; JSON Schemas of real tools nest about 10 deep


class _BadNumber(ValueError):
    pass


class _DuplicateKey(ValueError):
    pass


async def read_json_object(request: web.Request, limit: int) -> dict:
    check_content_type(request)
    if request.content_length is not None and request.content_length > limit:
        raise too_large(request.content_length, limit)
    data = bytearray()
    async for chunk in request.content.iter_chunked(64 * 1024):
        data += chunk
        if len(data) > limit:
            raise too_large(len(data), limit)
    connections.request_read(request)  # the read deadline stops here; answering may take long
    if not data:
        raise bad_request("empty_body", "the request has no body; send a JSON object")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request("invalid_utf8", f"the body is not valid UTF-8 (byte {exc.start})") from exc
    body = parse_json(text)
    if not isinstance(body, dict):
        raise bad_request("invalid_json", "the body must be a JSON object")
    check_tree(body)
    return body


def check_content_type(request: web.Request) -> None:
    """A body must be declared `application/json` (parameters such as `; charset=utf-8` and any
    case are fine). Anything else, and no Content-Type at all, is what a browser page on
    another site can send without asking (a form, `fetch` with text/plain or a Blob), so it
    is refused before the body is read."""
    given = request.headers.get("Content-Type")
    if given is not None and request.content_type.lower() in JSON_TYPES:
        return
    what = f"Content-Type {given.split(';')[0].strip()!r}" if given else "no Content-Type"
    raise ApiError(415, "unsupported_media_type",
                   f"the body must be JSON sent as application/json, got {what}; "
                   "add -H 'Content-Type: application/json' (curl -d sends application/x-www-form-urlencoded)")


def parse_json(text: str) -> object:
    try:
        return json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant,
                          object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        raise bad_request("invalid_json", f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:
        raise too_deep() from exc
    except _BadNumber as exc:
        raise bad_request("invalid_number", str(exc)) from exc
    except _DuplicateKey as exc:
        raise bad_request("duplicate_key", str(exc)) from exc


def _int(literal: str) -> int:
    digits = len(literal.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _BadNumber(f"the body has an integer of {digits} digits; the limit is {MAX_INT_DIGITS}")
    return int(literal)


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _BadNumber(f"the number {literal[:40]} is out of range: it is not a finite double")
    return value


def _constant(literal: str) -> float:
    raise _BadNumber(f"{literal} is not JSON: JSON numbers are finite (RFC 8259 has no NaN or Infinity)")


def _object(pairs: list[tuple[str, object]]) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _DuplicateKey(f"the key {key[:80]!r} appears twice in one object; send each key once")
    return out


def check_tree(value: object) -> None:
    """Nesting within MAX_DEPTH, and no lone surrogate in any key or string."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise bad_request("invalid_utf8", "the body contains a lone UTF-16 surrogate (\\ud800-\\udfff)") from None
        elif isinstance(v, (dict, list)):
            if depth > MAX_DEPTH:
                raise too_deep()
            items = [*v.keys(), *v.values()] if isinstance(v, dict) else v
            stack.extend((item, depth + 1) for item in items)


def too_deep() -> ApiError:
    return bad_request("invalid_json", f"the body nests arrays and objects more than {MAX_DEPTH} levels deep")


def too_large(size: int, limit: int) -> ApiError:
    return bad_request("body_too_large", f"the body is {size} bytes; the limit is {limit} bytes")
