"""The built dashboard (web/dist) on the same port: files as they are, and index.html for any
dotless path (the app routes in the browser). /v1/* never falls back: an unknown API path is
a JSON 404, not a page."""
from __future__ import annotations

from pathlib import Path

from aiohttp import web

from colibri.api.errors import ApiError
from colibri.api.keys import config_key


def not_found(path: str) -> ApiError:
    return ApiError(404, "not_found", f"no such endpoint: {path}")


async def get_static(request: web.Request) -> web.StreamResponse:
    path = request.match_info.get("path", "")
    if path == "v1" or path.startswith("v1/"):
        raise not_found(request.path)
    root: Path | None = request.app[config_key].web_dir
    if root is None or not (root / "index.html").is_file():
        if path == "":
            return web.Response(text="colibri is running; the dashboard is not built (cd web && npm run build, "
                                      "or install a wheel that carries it).\n")
        raise not_found(request.path)
    root = root.resolve()
    target = (root / path).resolve() if path else root / "index.html"
    if root not in target.parents and target != root / "index.html":
        raise not_found(request.path)  # ../ escapes stay inside the dashboard folder
    if target.is_file():
        return web.FileResponse(target)
    if "." not in Path(path).name:
        return web.FileResponse(root / "index.html")
    raise not_found(request.path)
