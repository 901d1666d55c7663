"""The OpenAI error envelope: one exception class for every refusal, one builder for its reply.

    raise ApiError(400, "invalid_value", "temperature must be between 0 and 2, got 3", param="temperature")

Handlers raise; the middleware (middleware.gateway) turns the exception into
{"error": {"message", "type", "param", "code"}} with the request-id headers.
The serving core raises its own errors (colibri.errors.RequestError), which
`as_api_error` maps to a status here, once, at the edge. Once a streaming 200
has gone out an error can only close the socket (docs/streaming.md#failures-mid-stream); the SSE
writers do that themselves.
"""
from __future__ import annotations

import json
import secrets

from aiohttp import web

from colibri.errors import (ContextExceeded, EngineFailed, InvalidRequest, ModelOutputRefused, NotSupported,
                            Overloaded, RequestError, Unavailable, UpstreamFailed)

TYPE_BY_STATUS = {
    401: "authentication_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
}


class ApiError(Exception):
    """A request the server refuses, with the status, code and field it names."""

    def __init__(self, status: int, code: str | None, message: str, *, param: str | None = None,
                 type: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.type = type or (TYPE_BY_STATUS.get(status) or ("server_error" if status >= 500 else "invalid_request_error"))
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class StreamAborted(Exception):
    """A stream that failed after its 200 went out: its socket is closed and the request counts
    as failed; the middleware hands back the response already sent."""

    def __init__(self, response: web.StreamResponse):
        super().__init__("the stream failed after its headers were sent")
        self.response = response


# the serving core's refusals by kind; the most specific class first
STATUS_BY_KIND: tuple[tuple[type[RequestError], int], ...] = (
    (ContextExceeded, 400), (InvalidRequest, 400), (Overloaded, 429), (Unavailable, 503), (NotSupported, 501),
    (UpstreamFailed, 502), (EngineFailed, 500), (ModelOutputRefused, 502))


def as_api_error(err: Exception) -> ApiError | None:
    """The HTTP refusal of an ApiError or a serving-core RequestError; None for anything else."""
    if isinstance(err, ApiError):
        return err
    if not isinstance(err, RequestError):
        return None
    status = getattr(err, "status", None) or next((s for kind, s in STATUS_BY_KIND if isinstance(err, kind)), 500)
    headers = {"Retry-After": str(err.retry_after_s)} if isinstance(err, Overloaded) else None
    return ApiError(status, err.code, err.message, param=err.param, headers=headers)


def bad_request(code: str, message: str, param: str | None = None) -> ApiError:
    return ApiError(400, code, message, param=param)


def new_request_id() -> str:
    return "req_" + secrets.token_hex(16)


def json_response(payload: object, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # ensure_ascii=False: text stays as the model wrote it (UTF-8 on the wire)
    return web.Response(text=json.dumps(payload, ensure_ascii=False, allow_nan=False), status=status,
                        content_type="application/json", headers=headers)


def error_response(err: ApiError) -> web.Response:
    return json_response(err.body(), status=err.status, headers=err.headers)
