# Sourced by run.sh and test.sh: make sure the system tools, the virtual
# environment and the built package are in place, doing nothing when they are.
#   COLI_VENV     the virtual environment (default: .venv in the checkout)
#   COLI_EXTRAS   pip extras to install (run.sh: none; test.sh: test; comma-separated)
# run.sh and test.sh share one install: the stamp records the sources' digest and the
# extras installed so far, and an install that has every extra asked for is enough.
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
# recompile the engine) only when it changes. The extras are not part of it.
install_digest() {
    (
        cd "$ROOT"
        echo "portable=${COLI_PORTABLE:-} cflags=${COLI_CFLAGS:-}"
        cat pyproject.toml setup.py engine/build_engine.py
        find engine/include engine/src -type f \( -name '*.c' -o -name '*.h' \) | sort | xargs cat
    ) | sha256sum | cut -d' ' -f1
}

extras_union() {
    # the extras of both comma-separated lists, sorted, without repeats ("" for none)
    printf '%s\n' "$1" "$2" | tr ',' '\n' | sed 's/^ *//; s/ *$//' | grep -v '^$' | sort -u | paste -sd, - || true
}

extras_requirements() {
    # the requirements of the extras $1 (comma-separated), from the installed package's metadata
    "$PY" - "$1" <<'PYEOF'
import importlib.metadata, re, sys
wanted = set(sys.argv[1].split(","))
for line in importlib.metadata.requires("colibri") or []:
    req, _, marker = line.partition(";")
    extra = re.search(r"extra\s*==\s*[\"']([^\"']+)[\"']", marker)
    if extra and extra.group(1) in wanted:
        print(req.strip())
PYEOF
}

ensure_venv() {
    # The stamp ($VENV/.colibri-install): the digest on its first line, "extras=a,b" on its second.
    if [ ! -x "$PY" ]; then
        say "creating the virtual environment $VENV"
        python3 -m venv "$VENV"
        "$PY" -m pip install -q --upgrade pip setuptools wheel cffi
    fi
    local want have_digest have_extras extras spec="$ROOT" stamp="$VENV/.colibri-install"
    want="$(install_digest)"
    have_digest="$(sed -n 1p "$stamp" 2>/dev/null || true)"
    have_extras="$(sed -n 's/^extras=//p' "$stamp" 2>/dev/null || true)"
    extras="$(extras_union "$have_extras" "${COLI_EXTRAS:-}")"
    if [ "$want" = "$have_digest" ] && [ "$extras" = "$(extras_union "$have_extras" "")" ]; then
        return  # installed from these sources, with every extra asked for (and maybe more)
    fi
    local reqs
    if [ "$want" = "$have_digest" ] && reqs="$(extras_requirements "$extras")"; then
        # the same sources, an extra more: its dependencies only, the engine is not compiled again
        say "installing the dependencies of colibri's extras: $extras"
        if [ -n "$reqs" ]; then
            local list=()
            mapfile -t list <<<"$reqs"
            "$PY" -m pip install -q "${list[@]}"
        fi
    else
        if [ -n "$extras" ]; then spec="$ROOT[$extras]"; fi
        say "installing colibri and compiling the engine (pip install -e)"
        "$PY" -m pip install -q --no-build-isolation -e "$spec"
        "$PY" -c 'import colibri._engine' || { echo "the engine failed to load; see the output above" >&2; exit 1; }
    fi
    printf '%s\nextras=%s\n' "$want" "$extras" >"$stamp"
}

ensure_system
ensure_venv
