# Sourced by run.sh and test.sh: make sure the system tools, the virtual
# environment and the built package are in place, doing nothing when they are.
#   COLI_VENV     the virtual environment (default: .venv in the checkout)
#   COLI_EXTRAS   pip extras to install (run.sh: none; test.sh: test)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${COLI_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

apt_install() {
    # System packages, from apt when missing (root here; sudo elsewhere).
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "need root or sudo to install: $*" >&2; exit 1; }
        sudo="sudo"
    fi
    say "installing system packages: $*"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

ensure_system() {
    local missing=()
    command -v python3 >/dev/null || missing+=(python3 python3-dev)
    command -v cc >/dev/null || missing+=(gcc libc6-dev)
    command -v make >/dev/null || missing+=(make)
    if command -v python3 >/dev/null && ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
        missing+=(python3-venv)
    fi
    if ((${#missing[@]})); then apt_install "${missing[@]}"; fi
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {
        echo "colibri needs Python 3.10 or newer (found $(python3 --version))" >&2
        exit 1
    }
}

# A digest of everything the installed package depends on: reinstall (and
# recompile the engine) only when it changes.
install_digest() {
    (
        cd "$ROOT"
        echo "extras=${COLI_EXTRAS:-} portable=${COLI_PORTABLE:-} cflags=${COLI_CFLAGS:-}"
        cat pyproject.toml setup.py engine/build_engine.py
        find engine/include engine/src -type f \( -name '*.c' -o -name '*.h' \) | sort | xargs cat
    ) | sha256sum | cut -d' ' -f1
}

ensure_venv() {
    if [ ! -x "$PY" ]; then
        say "creating the virtual environment $VENV"
        python3 -m venv "$VENV"
        "$PY" -m pip install -q --upgrade pip setuptools wheel cffi
    fi
    local want have spec="$ROOT"
    want="$(install_digest)"
    have="$(cat "$VENV/.colibri-install" 2>/dev/null || true)"
    if [ "$want" != "$have" ]; then
        if [ -n "${COLI_EXTRAS:-}" ]; then spec="$ROOT[${COLI_EXTRAS}]"; fi
        say "installing colibri and compiling the engine (pip install -e)"
        "$PY" -m pip install -q --no-build-isolation -e "$spec"
        "$PY" -c 'import colibri._engine' || { echo "the engine failed to load; see the output above" >&2; exit 1; }
        echo "$want" >"$VENV/.colibri-install"
    fi
}

ensure_system
ensure_venv
