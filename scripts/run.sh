#!/usr/bin/env bash
# Install what is needed (once) and run colibri's main job on the default model.
# Today that is describing the model; later issues make it the server + dashboard.
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
exec "$VENV/bin/coli" models info "$@"
