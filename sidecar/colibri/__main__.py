"""`python -m colibri` is `coli`."""
import sys

from colibri.cli import main

sys.exit(main())
