#!/usr/bin/env bash
# The desktop tests. Installs what they need (apt: Xvfb, ImageMagick,
# desktop-file-utils, WebKitGTK and Qt WebEngine runtime libraries; pip:
# pywebview[qt], python-xlib, PyInstaller; npm: the Tauri CLI), builds what
# they run, then runs tests/desktop under pytest:
#
#   1. freezes the sidecar           packaging/build_sidecar.sh → build/desktop/sidecar/
#   2. validates the .desktop file   desktop-file-validate packaging/linux/colibri.desktop
#   3. the shell's unit tests        cargo test (desktop/src-tauri)
#   4. builds the Tauri shell        tauri build --debug --no-bundle (no bundles: desktop/build.sh makes them)
#   5. tests/desktop                 the pywebview window, the frozen sidecar, the Tauri shell, under Xvfb
#
#   desktop/test.sh [PYTEST_ARGS]    e.g. desktop/test.sh -k window
#
# Builds are cached outside the clone, so a repeat run only redoes what changed:
#   CARGO_TARGET_DIR        default ~/.cache/colibri/cargo-target
#   COLI_PYINSTALLER_WORK   default ~/.cache/colibri/pyinstaller
# Screenshots land in build/desktop/screens/ (COLI_DESKTOP_OUT moves them).
set -euo pipefail
COLI_EXTRAS="${COLI_EXTRAS:-test}"
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/bootstrap.sh"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/colibri/cargo-target}"

APT_PACKAGES=(
    xvfb imagemagick desktop-file-utils file pkg-config build-essential
    # the Tauri shell: WebKitGTK 4.1 and what tauri's crates link
    libwebkit2gtk-4.1-dev libxdo-dev librsvg2-dev
    # Qt WebEngine (pywebview's Qt backend) at run time
    libxcb-cursor0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-render-util0
    libxcb-xinerama0 libxcb-xkb1 libnss3 libegl1 libgl1 libxkbfile1 libxcomposite1 libxdamage1 libxrandr2
    libxtst6 libasound2 libfontconfig1 libdbus-1-3 fonts-dejavu-core
)
PIP_PACKAGES=("pywebview[qt]==6.2.1" "python-xlib==0.33" "pyinstaller==6.22.3")

step() { say "$1"; STEP_START=$SECONDS; }
took() { say "  ($((SECONDS - STEP_START)) s)"; }

missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then apt_install "${missing[@]}"; fi
command -v cargo >/dev/null || { echo "desktop/test.sh: Rust (cargo 1.77+) is needed: https://rustup.rs" >&2; exit 1; }
command -v npm >/dev/null || { echo "desktop/test.sh: Node.js 20+ and npm are needed" >&2; exit 1; }
stamp="$VENV/.colibri-desktop-deps"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "${PIP_PACKAGES[*]}" ]; then
    say "installing ${PIP_PACKAGES[*]}"
    "$PY" -m pip install -q "${PIP_PACKAGES[@]}"
    echo "${PIP_PACKAGES[*]}" > "$stamp"
fi
if [ ! -f desktop/node_modules/.stamp-lock ] || ! cmp -s desktop/package-lock.json desktop/node_modules/.stamp-lock; then
    npm --prefix desktop ci --no-audit --no-fund
    cp desktop/package-lock.json desktop/node_modules/.stamp-lock
fi

step "freezing the sidecar (PyInstaller)"
packaging/build_sidecar.sh >/dev/null
took
step "validating packaging/linux/colibri.desktop"
desktop-file-validate packaging/linux/colibri.desktop
took
step "the Tauri shell's unit tests (cargo test, target dir $CARGO_TARGET_DIR)"
cargo test -q --manifest-path desktop/src-tauri/Cargo.toml --features tauri/custom-protocol
took
step "building the Tauri shell (debug, no bundles)"
(cd desktop && npx tauri build --debug --no-bundle)
took
step "tests/desktop under Xvfb"
export COLI_DESKTOP_TESTS=1 COLI_TAURI_BIN="$CARGO_TARGET_DIR/debug/colibri-desktop"
exec "$PY" -m pytest tests/desktop "$@"
