#!/usr/bin/env bash
# Installs the launcher of `coli web` for this user: the .desktop file (its
# Exec pointed at this machine's `coli`, since a desktop session's PATH may
# not include a virtual environment) and the icon in the hicolor theme.
#
#   packaging/linux/install.sh [PATH_TO_COLI]   default: `command -v coli`, else .venv/bin/coli
#   PREFIX=~/.local (default) — the files go under $PREFIX/share
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
coli="${1:-$(command -v coli || echo "$root/.venv/bin/coli")}"
[ -x "$coli" ] || { echo "no coli at $coli: pip install 'colibri[desktop]' first, or name it" >&2; exit 1; }
share="${PREFIX:-$HOME/.local}/share"
mkdir -p "$share/applications" "$share/icons/hicolor/scalable/apps" "$share/icons/hicolor/256x256/apps"
sed "s|^Exec=coli web|Exec=$coli web|" "$here/colibri.desktop" > "$share/applications/colibri.desktop"
cp "$root/packaging/icons/colibri.svg" "$share/icons/hicolor/scalable/apps/colibri.svg"
cp "$root/packaging/icons/colibri-256.png" "$share/icons/hicolor/256x256/apps/colibri.png"
if command -v desktop-file-validate >/dev/null; then desktop-file-validate "$share/applications/colibri.desktop"; fi
if command -v update-desktop-database >/dev/null; then update-desktop-database -q "$share/applications" || true; fi
echo "installed $share/applications/colibri.desktop (runs $coli web)"
