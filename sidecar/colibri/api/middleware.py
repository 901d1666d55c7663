"""What every request passes before a handler sees it, in this order (docs/server.md#security):
Host allowlist (DNS rebinding), the browser origin (CORS, and the cross-site requests a page
can send without CORS), API key; and the last-resort layer that turns any failure into the
OpenAI error envelope, never a bare traceback."""
from __future__ import annotations

import asyncio
import hmac
import logging

from aiohttp import web

from colibri.api import connections
from colibri.api.anthropic_protocol import error_body
from colibri.api.errors import ApiError, StreamAborted, as_api_error, error_response, json_response, new_request_id
from colibri.api.keys import authed_key, config_key, request_id_key
from colibri.errors import RequestError
from colibri.serve_config import LOOPBACK_NAMES, ServeConfig

log = logging.getLogger(__name__)

EXPOSED = "x-request-id, x-typesafe-request-id, request-id, x-colibri-queue-wait-ms, Retry-After"
ALLOWED_HEADERS = ("Authorization, Content-Type, x-api-key, x-stainless-retry-count, openai-organization, "
                   "anthropic-version, anthropic-beta, anthropic-dangerous-direct-browser-access")
OPEN_PATHS = ("/health",)  # reduced without the key
ANTHROPIC_PATHS = ("/v1/messages",)  # errors in Anthropic's envelope
STATUS_CODES = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}


def host_name(header: str) -> str:
    """The host part of a Host header: "[::1]:8000" -> "::1", "localhost:8000" -> "localhost"."""
    h = header.strip().lower()
    if h.startswith("["):
        return h[1:h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def host_allowed(cfg: ServeConfig, header: str) -> bool:
    name = host_name(header)
    if name == "":  # HTTP/1.0 clients send none
        return True
    allowed = {*LOOPBACK_NAMES, cfg.host.lower().strip("[]"), *(h.lower() for h in cfg.allowed_hosts)}
    return name in allowed


def origin_allowed(cfg: ServeConfig, origin: str, host: str = "") -> bool:
    """An origin on the CORS list, or this server's own (the dashboard it serves, whatever the
    port: `http://` or `https://` and the Host header, which has passed the allowlist)."""
    origin = origin.strip().rstrip("/").lower()
    if cfg.cors_any or origin in (o.lower() for o in cfg.cors_origins):
        return True
    host = host.strip().lower()
    return bool(host) and origin in (f"http://{host}", f"https://{host}")


def browser_refusal(cfg: ServeConfig, request: web.Request) -> ApiError | None:
    """A browser request from a page of another site, refused before any work: one whose
    Origin is not allowed, and on API and feed paths one a page sends without an Origin (an
    <img>, <script> or <iframe> GET), which the browser marks `Sec-Fetch-Site: cross-site`
    or `same-site`. Clients that are not browsers send neither header."""
    origin = request.headers.get("Origin")
    if origin is not None:
        if origin_allowed(cfg, origin, request.headers.get("Host", "")):
            return None
        return ApiError(403, "forbidden", f"Origin {origin!r} is not allowed; start the server with "
                                          f"--cors-origin +{origin} to trust that page")
    site = request.headers.get("Sec-Fetch-Site", "").lower()
    if site in ("cross-site", "same-site") and (needs_key(request.path) or request.path in OPEN_PATHS):
        return ApiError(403, "forbidden", "a page of another site cannot load this path: it is for "
                                          "clients and the dashboard's own scripts")
    return None


def key_of(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return request.headers.get("x-api-key")


def key_ok(cfg: ServeConfig, request: web.Request) -> bool:
    if not cfg.api_key:
        return True
    given = key_of(request)
    return given is not None and hmac.compare_digest(given.encode(), cfg.api_key.encode())


def needs_key(path: str) -> bool:
    return (path in ("/metrics", "/v1", "/experts", "/experts/coroute", "/profile", "/events")
            or path.startswith(("/v1/", "/api/")))


async def on_prepare(request: web.Request, resp: web.StreamResponse) -> None:
    """Headers every reply carries, streams and files included: the request id and CORS."""
    request_id = request.get(request_id_key) or new_request_id()
    resp.headers["x-request-id"] = resp.headers["x-typesafe-request-id"] = request_id
    if request.path.startswith(ANTHROPIC_PATHS):
        resp.headers["request-id"] = request_id  # the header Anthropic's SDKs read
    cfg = request.app[config_key]
    origin = request.headers.get("Origin")
    if origin and origin_allowed(cfg, origin, request.headers.get("Host", "")):
        resp.headers["Access-Control-Allow-Origin"] = "*" if cfg.cors_any else origin
        resp.headers["Access-Control-Expose-Headers"] = EXPOSED
        resp.headers.add("Vary", "Origin")


def preflight(request: web.Request) -> web.Response:
    return web.Response(status=204, headers={
        "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
        "Access-Control-Allow-Headers": request.headers.get("Access-Control-Request-Headers", ALLOWED_HEADERS),
        "Access-Control-Max-Age": "600",
    })


@web.middleware
async def gateway(request: web.Request, handler) -> web.StreamResponse:
    cfg = request.app[config_key]
    request[request_id_key] = new_request_id()
    connections.request_started(request)
    try:
        resp = await guarded(request, handler, cfg)
    except (ApiError, RequestError) as err:  # the serving core's refusals get their status here, once
        resp = envelope(request, as_api_error(err))
    except StreamAborted as aborted:
        resp = aborted.response
    except web.HTTPException as exc:  # aiohttp's own (unknown route, wrong method): same envelope
        if exc.status < 400:
            raise
        resp = envelope(request, ApiError(exc.status, STATUS_CODES.get(exc.status), exc.reason or str(exc)))
    except (asyncio.CancelledError, ConnectionResetError):
        raise  # the client went away: nothing to answer
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        resp = envelope(request, ApiError(500, "engine_error", "internal error; see the server log"))
    return resp


def envelope(request: web.Request, err: ApiError) -> web.Response:
    """The error in the envelope of the API family the path belongs to."""
    if request.path.startswith(ANTHROPIC_PATHS) or (request.path.startswith("/v1/models")
                                                    and "anthropic-version" in request.headers):
        return json_response(error_body(err, request.get(request_id_key)), status=err.status, headers=err.headers)
    return error_response(err)


async def guarded(request: web.Request, handler, cfg: ServeConfig) -> web.StreamResponse:
    if not host_allowed(cfg, request.headers.get("Host", "")):
        raise ApiError(403, "forbidden", f"Host {request.headers.get('Host')!r} is not allowed; "
                                         "start the server with --allowed-host NAME to trust it")
    refusal = browser_refusal(cfg, request)
    if refusal is not None:
        raise refusal
    if request.method == "OPTIONS":
        return preflight(request)
    authed = key_ok(cfg, request)
    request[authed_key] = authed
    if needs_key(request.path) and not authed:
        raise ApiError(401, "invalid_api_key", "missing or invalid API key: send 'Authorization: Bearer KEY' "
                                               "or 'x-api-key: KEY'", type="authentication_error")
    return await handler(request)
