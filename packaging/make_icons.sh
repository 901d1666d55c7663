#!/usr/bin/env bash
# Rasterises packaging/icons/colibri.svg (the dashboard's favicon, the one
# source of the app's look) into the PNGs the .desktop launcher and the Tauri
# bundles use. The PNGs are committed; run this after changing the SVG.
# Needs rsvg-convert (Debian: librsvg2-bin).
set -euo pipefail
cd "$(dirname "$0")/.."
svg=packaging/icons/colibri.svg
for n in 32 128 256 512; do
    rsvg-convert -w "$n" -h "$n" "$svg" -o "packaging/icons/colibri-$n.png"
done
tauri=desktop/src-tauri/icons
cp packaging/icons/colibri-32.png "$tauri/32x32.png"
cp packaging/icons/colibri-128.png "$tauri/128x128.png"
cp packaging/icons/colibri-256.png "$tauri/128x128@2x.png"
cp packaging/icons/colibri-512.png "$tauri/icon.png"
