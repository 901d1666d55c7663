"""`coli`: the command line. Subcommands live in colibri/commands/, one per module."""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys

from colibri import __version__, commands
from colibri.errors import ColiError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="coli",
        description="colibri: run Mixture-of-Experts language models on your own machine.",
    )
    parser.add_argument("--version", action="store_true", help="print the version, engine build and CPU features")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # "planned" goes last: it only fills names no real command module has taken
    names = sorted((m.name for m in pkgutil.iter_modules(commands.__path__)), key=lambda n: (n == "planned", n))
    for name in names:
        importlib.import_module(f"colibri.commands.{name}").register(sub)
    return parser


def version_text(verbose: int = 0) -> str:
    lines = [f"coli {__version__}"]
    try:
        from colibri import engine

        lines.append(f"engine {engine.version()} ({engine.build_info()})")
        capped = f" (COLI_CPU_ISA={os.environ['COLI_CPU_ISA']})" if os.environ.get("COLI_CPU_ISA") else ""
        lines.append(f"cpu: {engine.cpu_features() or 'no SIMD features detected'}{capped}")
        if verbose:
            from colibri import kernel_choice

            lines.append(f"cpu model: {kernel_choice.cpu_model()}")
            lines += kernel_choice.version_lines()
    except ImportError as exc:  # the C extension failed to build or load
        lines.append(f"engine: not loaded ({exc})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if args.version:
        print(version_text(args.verbose))
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except ColiError as exc:
        print(f"coli {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
