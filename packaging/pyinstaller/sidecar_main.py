"""The frozen sidecar's entry point: the `coli` command line (the Tauri shell runs `colibri-sidecar serve`)."""
import sys

from colibri.cli import main

if __name__ == "__main__":
    sys.exit(main())
