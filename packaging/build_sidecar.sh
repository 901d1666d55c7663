#!/usr/bin/env bash
# Freezes the sidecar (`coli`, the C engine, web/dist and the default model)
# into one folder with PyInstaller:
#
#   packaging/build_sidecar.sh      → build/desktop/sidecar/colibri-sidecar/colibri-sidecar
#
# Uses the project's virtual environment (scripts/bootstrap.sh makes it) and
# installs PyInstaller into it; builds web/dist when it is missing. PyInstaller's
# work folder is kept outside the clone (COLI_PYINSTALLER_WORK, default
# ~/.cache/colibri/pyinstaller) so a repeat build only redoes what changed.
#   COLI_FREEZE_MODEL=0   leave the default model out (then give the sidecar --model / COLI_MODEL);
#                         =ID,ID  freeze these (e.g. qwen2.5-coder-0.5b-instruct,gemma-3-270m); default 1:
#                         the default model, Qwen2.5-Coder 0.5B Instruct (491 MB, pulled once if missing)
set -euo pipefail
COLI_EXTRAS="${COLI_EXTRAS:-test}"
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/bootstrap.sh"
cd "$ROOT"

PYINSTALLER_VERSION="6.22.3"
WORK="${COLI_PYINSTALLER_WORK:-$HOME/.cache/colibri/pyinstaller}"
DIST="$ROOT/build/desktop/sidecar"

if ! "$PY" -c "import PyInstaller, sys; sys.exit(PyInstaller.__version__ != '$PYINSTALLER_VERSION')" 2>/dev/null; then
    say "installing PyInstaller $PYINSTALLER_VERSION"
    "$PY" -m pip install -q "pyinstaller==$PYINSTALLER_VERSION"
fi
if [ ! -f web/dist/index.html ] || [ -n "$(find web/src web/index.html web/package.json -newer web/dist/index.html 2>/dev/null | head -n1)" ]; then
    say "building the dashboard (web/dist)"
    [ -d web/node_modules ] || npm --prefix web ci --no-audit --no-fund >/dev/null
    npm --prefix web run build >/dev/null
fi
say "freezing the sidecar into $DIST/colibri-sidecar"
mkdir -p "$WORK" "$DIST"
"$PY" -m PyInstaller --noconfirm --log-level WARN --workpath "$WORK" --distpath "$DIST" \
    packaging/pyinstaller/colibri-sidecar.spec
echo "$DIST/colibri-sidecar/colibri-sidecar"
