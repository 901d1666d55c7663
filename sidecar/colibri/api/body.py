"""Reading a request body as one JSON object, refusing each way it can be wrong by name:
too large, empty, not UTF-8, not JSON, not an object, or carrying a lone surrogate
(legal in JSON's \\u escapes, but not text the tokenizer can take)."""
from __future__ import annotations

import json

from aiohttp import web

from colibri.api.errors import ApiError, bad_request


async def read_json_object(request: web.Request, limit: int) -> dict:
    if request.content_length is not None and request.content_length > limit:
        raise too_large(request.content_length, limit)
    data = bytearray()
    async for chunk in request.content.iter_chunked(64 * 1024):
        data += chunk
        if len(data) > limit:
            raise too_large(len(data), limit)
    if not data:
        raise bad_request("empty_body", "the request has no body; send a JSON object")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request("invalid_utf8", f"the body is not valid UTF-8 (byte {exc.start})") from exc
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise bad_request("invalid_json", f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:
        raise bad_request("invalid_json", "the body nests too deeply") from exc
    if not isinstance(body, dict):
        raise bad_request("invalid_json", "the body must be a JSON object")
    if _has_lone_surrogate(body):
        raise bad_request("invalid_utf8", "the body contains a lone UTF-16 surrogate (\\ud800-\\udfff)")
    return body


def too_large(size: int, limit: int) -> ApiError:
    return bad_request("body_too_large", f"the body is {size} bytes; the limit is {limit} bytes")


def _has_lone_surrogate(value: object) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False
