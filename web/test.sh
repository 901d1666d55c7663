#!/usr/bin/env bash
# The dashboard's tests: installs what they need (npm ci when the lock file
# changed, Debian's chromium when missing), type-checks, lints, runs the unit tests,
# builds web/dist and runs the browser tests in headless Chromium.
#
#   web/test.sh                 everything
#   web/test.sh unit            type-check, lint and unit tests only
#   COLI_BASE_URL=http://127.0.0.1:8000 web/test.sh
#                               browser tests against a live `coli serve`
#                               (which serves this web/dist) instead of vite preview
#
# Screenshots land in web/build/e2e/ (COLI_E2E_OUT to move them).
set -euo pipefail
cd "$(dirname "$0")"

need_node() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "web/test.sh: Node.js 20.19+ and npm are needed" >&2
    exit 1
  fi
}

install_deps() {
  local stamp=node_modules/.stamp-lock
  if [[ ! -f $stamp ]] || ! cmp -s package-lock.json "$stamp"; then
    npm ci --no-audit --no-fund
    cp package-lock.json "$stamp"
  fi
}

apt() {
  if [[ $(id -u) -eq 0 ]]; then apt-get "$@"; else sudo apt-get "$@"; fi
}

install_chromium() {
  if [[ -n ${CHROMIUM_PATH:-} && -x ${CHROMIUM_PATH} ]]; then return; fi
  if command -v chromium >/dev/null || [[ -x /usr/bin/chromium ]]; then return; fi
  echo "web/test.sh: installing Debian's chromium"
  apt update -qq
  DEBIAN_FRONTEND=noninteractive apt install -y -qq chromium
}

need_node
install_deps
echo "== type-check"
npx tsc -b
echo "== lint"
npx eslint --max-warnings 0 .
echo "== unit tests"
npx vitest run
[[ ${1:-} == unit ]] && exit 0
echo "== build"
npx vite build --logLevel warn
install_chromium
echo "== browser tests${COLI_BASE_URL:+ against $COLI_BASE_URL}"
npx vitest run --config vitest.e2e.config.ts
