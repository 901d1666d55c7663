#!/usr/bin/env bash
# The Tauri bundles (`npm run desktop:build` at the root): freezes the sidecar,
# builds the shell in release mode and bundles both as a .deb and an AppImage.
#
#   desktop/build.sh                       → build/desktop/bundles/colibri_<version>_<arch>.deb, colibri_<version>_<arch>.AppImage
#   COLI_BUNDLES=deb desktop/build.sh      only the .deb (the AppImage step downloads linuxdeploy from GitHub)
#
# Needs what desktop/test.sh installs (WebKitGTK dev packages, Rust, Node).
# CARGO_TARGET_DIR defaults to ~/.cache/colibri/cargo-target, outside the clone.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/colibri/cargo-target}"
BUNDLES="${COLI_BUNDLES:-deb,appimage}"

packaging/build_sidecar.sh
if [ ! -f desktop/node_modules/.stamp-lock ] || ! cmp -s desktop/package-lock.json desktop/node_modules/.stamp-lock; then
    npm --prefix desktop ci --no-audit --no-fund
    cp desktop/package-lock.json desktop/node_modules/.stamp-lock
fi
(cd desktop && npx tauri build --bundles "$BUNDLES" --config src-tauri/tauri.bundle.conf.json)
out="$ROOT/build/desktop/bundles"
rm -rf "$out" && mkdir -p "$out"
find "$CARGO_TARGET_DIR/release/bundle" -maxdepth 2 -type f \( -name '*.deb' -o -name '*.AppImage' \) \
    -exec cp {} "$out/" \;
ls -la "$out"
